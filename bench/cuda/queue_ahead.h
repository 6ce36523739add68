// A spinning kernel on the default stream, so that what the host queues behind it runs back to
// back once it ends: timed that way, a kernel's time leaves out the host's launch latency (which
// CUDA graphs remove in the engine). And an empty kernel, to measure that latency.
#pragma once

namespace pagoda::bench {

/// One thread spins on the global timer for `microseconds`, on the legacy default stream.
void launch_spin(double microseconds);

/// A kernel that does nothing (one warp), on the legacy default stream.
void launch_empty();

}  // namespace pagoda::bench
