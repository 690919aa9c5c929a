/* A library built to fail check_symbols.sh (its --self-test): one NCCL
 * function out of dozens, two symbols that are not NCCL's, and the wrong file
 * name and SONAME. */
int ncclGetVersion(int* version) {
  *version = 0;
  return 0;
}
int lanesLeakedFunction(void) { return 1; }
int helperNotNccl(void) { return 2; }
