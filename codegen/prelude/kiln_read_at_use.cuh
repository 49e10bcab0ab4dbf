// ---- Tiles read where they are used (sm_90a) ------------------------------------------------------------
// A tile of registers that is not held: element r is read where it is used, by `read(r)` (a staged row
// vector read from its ring slot, codegen/emit_staged_loads.cpp). Indexed as a register array is.
template <typename Read> struct kiln_read_at_use {
  Read read;
  __device__ __forceinline__ auto operator[](int r) const { return read(r); }
};
template <typename Read> __device__ __forceinline__ kiln_read_at_use<Read> kiln_reads_at_use(Read read) {
  return {read};
}
