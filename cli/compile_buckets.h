// `fusetune compile MODEL --dim seq=1,16,64,256 [--dim past=64,511]`:
// the plans of a model tuned in shape buckets (`tune --dim` with lists), one
// per bucket, and where between neighbouring buckets the compiled plan
// switches. A run at a size between buckets compiles its own plan: the
// measured plan of its nearest tuned size, its partition kept and its
// tilings moved to the size, so buckets may differ in which groups fuse (at
// one token a GEMM's epilogue fusion that pays at 512 may not). The switch
// points are found by bisection over compiles at sizes between two buckets
// whose plans differ, for the partition, else for the tilings: a switch
// point, the first if there is one (bisection assumes no switch back). A
// bucket measured as a whole model keeps that plan at its own size only.
#pragma once

#include <string>

#include "cli/cli_common.h"
#include "cli/compile_args.h"

namespace fusetune::cli {

// The report, or an error (a bucket that does not compile names its sizes).
Result<std::string> ExplainBuckets(const std::string& model, const ModelOptions& options,
                                   int threads, const CompileArgs& args, TuningSource& source);

}  // namespace fusetune::cli
