// use_exported.cpp — a C++ program calling a NumPy function exported by dynexpr.export: no
// Python at run time, only layer_norm.hpp and liblayer_norm.so. It checks the results
// against NumPy's, written beside the library by examples/cpp/export_example.py:
//
//   python examples/cpp/export_example.py OUT
//   meson configure build -Dexported=OUT && meson compile -C build
//   build/examples/cpp/use_exported OUT
#include <cmath>
#include <cstdio>
#include <dynexpr/dynexpr.hpp>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "layer_norm.hpp"

namespace dx = dynexpr;
namespace dxe = dynexpr::exported;

static std::vector<float> read_floats(const std::string& path, std::size_t n) {
  std::vector<float> v(n);
  std::ifstream f(path, std::ios::binary);
  if (!f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float))))
    throw std::runtime_error("cannot read " + std::to_string(n) + " floats from " + path);
  return v;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: use_exported DIR (written by examples/cpp/export_example.py)\n";
    return 2;
  }
  const std::string dir = argv[1];
  std::cout << layer_norm::describe() << "\n";
  int failures = 0;
  for (int rows : {3, 1000}) {
    const std::string base = dir + "/case_" + std::to_string(rows);
    long long n = 0, features = 0;
    std::ifstream(base + ".txt") >> n >> features;
    const auto size = static_cast<std::size_t>(n * features);

    // Inputs as a dx::Tensor (it converts to an argument) and as raw pointers + shapes.
    dx::Tensor<float> x(dx::Shape{n, features});
    const std::vector<float> xs = read_floats(base + "_x.bin", size);
    std::copy(xs.begin(), xs.end(), x.data());
    std::vector<float> gamma = read_floats(base + "_gamma.bin", static_cast<std::size_t>(features));
    std::vector<float> beta = read_floats(base + "_beta.bin", static_cast<std::size_t>(features));
    const std::vector<float> want = read_floats(base + "_want.bin", size);

    std::vector<dxe::Array> out = layer_norm::run(
        {x, dxe::Array(gamma.data(), {features}), dxe::Array(beta.data(), {features})});
    const dxe::Array& y = out.at(0);
    double worst = 0.0;
    for (std::size_t i = 0; i < size; ++i)
      worst = std::fmax(worst, std::fabs(static_cast<double>(y.data_as<float>()[i]) - want[i]));
    const bool ok = y.type() == dxe::dtype::float32 && y.ndim() == 2 && y.shape()[0] == n &&
                    y.shape()[1] == features && worst <= 1e-5;
    std::printf("layer_norm on %lld x %lld: result %s, max |C++ - NumPy| = %.3g  %s\n", n, features,
                y.describe().c_str(), worst, ok ? "ok" : "MISMATCH");
    failures += !ok;
  }

  // A call no specialisation takes is an error that says why, not a crash.
  std::vector<double> wrong(64);
  std::vector<dxe::Array> results;
  std::string message;
  const int rc =
      layer_norm::try_run({dxe::Array(wrong.data(), {1, 64}), 1.0, 0.0}, results, message);
  std::printf("a float64 call: status %d (no_specialisation is %d)\n%s\n", rc,
              dxe::no_specialisation, message.c_str());
  failures += rc != dxe::no_specialisation;
  return failures ? 1 : 0;
}
