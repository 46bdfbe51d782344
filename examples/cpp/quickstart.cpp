// quickstart.cpp — the first program to copy: fused expressions, reductions, views,
// describe, Eigen. Build: meson setup build && ninja -C build && build/examples/cpp/quickstart
#include <dynexpr/dynexpr.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>

namespace dx = dynexpr;

int main() {
  // Tensors are zero-filled, 64-byte aligned, row-major.
  dx::Tensor<float> x(dx::Shape{1024, 512}), y(dx::Shape{1024, 512});
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (dx::index_t i = 0; i < x.size(); ++i) x.data()[i] = u(rng), y.data()[i] = u(rng);

  // One pass over memory, SIMD, threaded: nothing is computed until assignment.
  dx::Tensor<float> z = dx::tanh(x * 2.0f + y) * 0.5f + x * y;
  std::cout << "z = tanh(x * 2 + y) * 0.5 + x * y   z(3, 4) = " << z.at(3, 4) << "\n";

  // A reduction whose input is fused: softmax denominators of each row.
  dx::Tensor<float> r = dx::sum(dx::exp(x - dx::max(x, 1, true)), 1, true);
  std::cout << "row sums of exp(x - rowmax): shape " << r.shape().str() << ", r(0, 0) = " << r.at(0, 0) << "\n";

  // Full reductions give scalars.
  float total = dx::sum(z);
  std::cout << "sum(z) = " << total << ", mean(x) = " << dx::mean(x) << ", std(x) = " << dx::std(x) << "\n";

  // Non-owning strided views over any memory: every second element.
  float raw[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto v = dx::view(raw, dx::Shape{5}, dx::Strides{2});
  std::cout << "sum of every second element of 0..9 = " << dx::sum(v) << "\n";

  // NumPy slicing: x[::-1, 1:10:3] is a view.
  auto s = x.slice(dx::slice(dx::none, dx::none, -1), dx::slice(1, 10, 3));
  std::cout << "x[::-1, 1:10:3] has shape " << s.shape().str() << " and strides " << s.strides().str() << "\n";

  // What an expression is, as written and as evaluated (a * b + c becomes one FMA).
  std::cout << "describe: " << dx::describe(x * 2.0f + y) << "   lowered: " << dx::describe_lowered(x * 2.0f + y)
            << "\n";

  // Eigen: view an Eigen matrix, multiply through Eigen's GEMM.
  Eigen::MatrixXf m = Eigen::MatrixXf::Identity(512, 3);
  dx::Tensor<float> p = dx::matmul(x, dx::view(m) * 2.0f);
  std::cout << "matmul(x, 2 * I[:, :3]) (0, 1) = " << p.at(0, 1) << " (2 * x(0, 1) = " << 2 * x.at(0, 1) << ")\n";

  // NumPy 2 promotion: a C++ double scalar does not widen a float32 tensor.
  auto e = x * 0.5;
  static_assert(std::is_same_v<decltype(e)::value_type, float>);
  std::cout << "threads: " << dx::parallel::num_threads() << "\n";
  return 0;
}
