// dynexpr/dynexpr.hpp — the whole library: `#include <dynexpr/dynexpr.hpp>` and
// `namespace dx = dynexpr;`. See README.md and examples/cpp/quickstart.cpp.
#pragma once

#include "dynexpr/core/config.hpp"
// config.hpp first: it sets Highway's static-dispatch mode before Highway is included.
#include "dynexpr/core/dtype.hpp"
#include "dynexpr/core/error.hpp"
#include "dynexpr/core/shape.hpp"
#include "dynexpr/core/tensor.hpp"
#include "dynexpr/eval/assign.hpp"
#include "dynexpr/eval/reductions.hpp"
#include "dynexpr/eval/softmax.hpp"
#include "dynexpr/expr/describe.hpp"
#include "dynexpr/interop/eigen.hpp"
#include "dynexpr/ops/operators.hpp"
#include "dynexpr/ops/registry.hpp"
#include "dynexpr/parallel/thread_pool.hpp"
