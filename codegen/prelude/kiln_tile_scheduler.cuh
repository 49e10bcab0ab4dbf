namespace kiln {
// ---- A dynamic persistent grid's tile scheduler (PERSISTENT=2) --------------------------------------------
// CTA b of a persistent grid runs program b first; each later program it takes by drawing from a counter in
// global memory that is 0 when the launch starts: draw t is program gridDim.x + t, and a CTA stops at the first
// draw past the last program. So the CTA that finishes first takes the next program, ids start in increasing
// order (the DSL program's own mapping of ids to tiles is the order tiles start in), and a launch draws exactly
// `programs` times (programs - gridDim.x draws that run a program, one past the end for each CTA, gridDim.x <=
// programs). The draw that returns programs - 1 is therefore the launch's last: it sets the counter back to 0,
// and the next launch on the stream, which starts after this one ends, finds it there. Launches that may run at
// the same time must use different counters (jit/jit_kernel.cpp hands its launches 1024 counters in turn).
__device__ __forceinline__ int draw_program(int* counter, int programs) {
  const int drawn = atomicAdd(counter, 1);
  if (drawn == programs - 1)
    atomicExch(counter, 0);
  return static_cast<int>(gridDim.x) + drawn;
}
} // namespace kiln
