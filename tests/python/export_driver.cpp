// A C++ program that calls a function exported by dynexpr.export (tests/python/exported_cpp.py
// compiles it with -DEXPORTED_HEADER="NAME.hpp" -DEXPORTED_NS=NAME against libNAME.so):
//
//   export_driver ARGS.txt OUTDIR
//
// ARGS.txt has one argument per line:
//   array DTYPE NDIM SHAPE... STRIDES... OFFSET FILE   a view into FILE's bytes (loaded once,
//                                                      so two views of one file alias)
//   float V | int V | bool 0|1 | none
// It calls NAME::run and writes OUTDIR/results.txt: "ok N" then per result
// "DTYPE NDIM SHAPE..." with its elements C-ordered in OUTDIR/result_K.bin; or
// "error CODE" and the message. Every FILE is written back to OUTDIR/FILE (a function
// that updates an argument in place changes it).
#include EXPORTED_HEADER

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace dxe = dynexpr::exported;

static dxe::dtype parse_dtype(const std::string& s) {
  const char* names[] = {"bool", "uint8", "int32", "int64", "float32", "float64"};
  for (int i = 0; i < 6; ++i)
    if (s == names[i]) return static_cast<dxe::dtype>(i);
  throw std::runtime_error("unknown dtype " + s);
}

static std::vector<char> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: export_driver ARGS.txt OUTDIR\n";
    return 2;
  }
  const std::string outdir = argv[2];
  std::map<std::string, std::unique_ptr<double[]>> buffers;
  std::map<std::string, std::size_t> sizes;
  std::vector<dxe::Arg> args;
  std::ifstream in(argv[1]);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string kind;
    ls >> kind;
    if (kind == "array") {
      std::string dt, file;
      int nd;
      ls >> dt >> nd;
      std::vector<std::int64_t> shape(nd), strides(nd);
      for (auto& e : shape) ls >> e;
      for (auto& e : strides) ls >> e;
      std::int64_t offset;
      ls >> offset >> file;
      if (!buffers.count(file)) {  // 8-byte aligned storage for any dtype
        std::vector<char> bytes = read_all(file);
        std::unique_ptr<double[]> b(new double[bytes.size() / 8 + 1]);
        std::memcpy(b.get(), bytes.data(), bytes.size());
        sizes[file] = bytes.size();
        buffers[file] = std::move(b);
      }
      const dxe::dtype t = parse_dtype(dt);
      char* base = reinterpret_cast<char*>(buffers[file].get()) + offset * dxe::itemsize(t);
      switch (t) {
        case dxe::dtype::bool_:
          args.emplace_back(dxe::Array(reinterpret_cast<bool*>(base), shape, strides));
          break;
        case dxe::dtype::uint8:
          args.emplace_back(dxe::Array(reinterpret_cast<std::uint8_t*>(base), shape, strides));
          break;
        case dxe::dtype::int32:
          args.emplace_back(dxe::Array(reinterpret_cast<std::int32_t*>(base), shape, strides));
          break;
        case dxe::dtype::int64:
          args.emplace_back(dxe::Array(reinterpret_cast<std::int64_t*>(base), shape, strides));
          break;
        case dxe::dtype::float32:
          args.emplace_back(dxe::Array(reinterpret_cast<float*>(base), shape, strides));
          break;
        case dxe::dtype::float64:
          args.emplace_back(dxe::Array(reinterpret_cast<double*>(base), shape, strides));
          break;
      }
    } else if (kind == "float") {
      double v;
      ls >> v;
      args.emplace_back(v);
    } else if (kind == "int") {
      long long v;
      ls >> v;
      args.emplace_back(v);
    } else if (kind == "bool") {
      int v;
      ls >> v;
      args.emplace_back(v != 0);
    } else if (kind == "none") {
      args.emplace_back(nullptr);
    } else if (!kind.empty()) {
      std::cerr << "export_driver: unknown argument kind " << kind << "\n";
      return 2;
    }
  }
  std::vector<dxe::Array> results;
  std::string message;
  const int rc = EXPORTED_NS::try_run(args, results, message);
  std::ofstream res(outdir + "/results.txt");
  if (rc != 0) {
    res << "error " << rc << "\n" << message << "\n";
  } else {
    res << "ok " << results.size() << "\n";
    for (std::size_t k = 0; k < results.size(); ++k) {
      const dxe::Array c = results[k].copy();
      res << dxe::dtype_name(c.type()) << " " << c.ndim();
      for (auto e : c.shape()) res << " " << e;
      res << "\n";
      std::ofstream o(outdir + "/result_" + std::to_string(k) + ".bin", std::ios::binary);
      o.write(static_cast<const char*>(c.data()),
              static_cast<std::streamsize>(c.size() *
                                           static_cast<std::int64_t>(dxe::itemsize(c.type()))));
    }
  }
  for (auto& [file, buf] : buffers) {
    const std::string name = file.substr(file.find_last_of('/') + 1);
    std::ofstream o(outdir + "/" + name, std::ios::binary);
    o.write(reinterpret_cast<const char*>(buf.get()), static_cast<std::streamsize>(sizes[file]));
  }
  return 0;
}
