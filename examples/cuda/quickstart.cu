// quickstart.cu — the same expressions as examples/cpp/quickstart.cpp, on a GPU: device
// arrays, one fused kernel per assignment. Built by Meson when nvcc is found (PATH, or
// CUDACXX=/usr/local/cuda/bin/nvcc): build/examples/cuda/quickstart_cuda. By hand:
//   nvcc -std=c++20 --expt-relaxed-constexpr -arch=native -I include
//        examples/cuda/quickstart.cu -o quickstart_cuda   (one line)
#include <dynexpr/cuda/cuda.hpp>

#include <cstdio>
#include <random>

namespace dx = dynexpr;

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("quickstart_cuda: no CUDA device here; nothing to run");
    return 0;
  }
  // Host data, copied to the device once.
  dx::Tensor<float> hx(dx::Shape{1024, 512}), hy(dx::Shape{512});
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (dx::index_t i = 0; i < hx.size(); ++i) hx.data()[i] = u(rng);
  for (dx::index_t i = 0; i < hy.size(); ++i) hy.data()[i] = u(rng);
  dx::cuda::device_tensor<float> x = dx::cuda::to_device(hx), y = dx::cuda::to_device(hy);
  // Views are what expressions are made of (pointer, shape, strides; not owning).
  dx::cuda::device_view<float> X = x.view(), Y = y.view();

  // One grid-stride kernel: y broadcasts along the rows, a * b + c becomes an FMA.
  dx::cuda::device_tensor<float> z = dx::cuda::eval(dx::tanh(X * 2.0f + Y) * 0.5f + X * Y);
  dx::Tensor<float> hz = dx::cuda::to_host(z);
  const float expect = std::tanh(hx.at(3, 4) * 2.0f + hy.at(4)) * 0.5f + hx.at(3, 4) * hy.at(4);
  std::printf("z = tanh(x * 2 + y) * 0.5 + x * y   z(3, 4) = %g (host: %g)\n", hz.at(3, 4), expect);

  // Into existing memory, any dtype the value converts to; in place is fine (x = f(x)).
  dx::cuda::device_tensor<double> w(dx::Shape{1024, 512});
  dx::cuda::assign(w, dx::where(X > 0.0f, dx::cast<double>(X), dx::exp(X) - 1.0));
  dx::cuda::assign(X, dx::minimum(X, Y));

  // Strided device views: every second column of x, transposed.
  dx::cuda::device_view<float> cols(x.data(), dx::Shape{256, 1024}, dx::Strides{2, 512});
  dx::cuda::device_tensor<float> c = dx::cuda::eval(cols * cols);
  std::printf("(x[:, ::2].T ** 2) has shape %s\n", c.shape().str().c_str());
  cudaDeviceSynchronize();
  return 0;
}
