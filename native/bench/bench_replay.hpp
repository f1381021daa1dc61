// The replay benchmark (bench_replay.cpp), run as `vramscope_bench replay [options]`: events per
// second of the replay engine per strategy over a synthetic 1 M-event trace, beside the bare loop
// over the same events with no allocator, measured in the same run.
#pragma once

namespace vramscope::bench {

// argv[0] is "replay"; returns the process exit code.
int replay_main(int argc, char** argv);

}  // namespace vramscope::bench
