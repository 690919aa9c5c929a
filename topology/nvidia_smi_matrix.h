// Reads the matrix of `nvidia-smi topo -m` as people paste it: tabs or
// spaces, a markdown table, NIC columns named NIC# (with a "NIC Legend") or
// by device (mlx5_0, older drivers), with or without the NUMA Affinity and
// GPU NUMA ID columns, followed by the legend or by other nvidia-smi output.
// Checks what a cut or edited paste breaks; import_nvidia_smi.cc builds the
// tree from the result.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "topology/path_class.h"

namespace lanes::topo {

struct SmiMatrix {
  std::vector<std::string> devices;  // header order: GPU0.., NIC0.. or mlx5_0..
  std::vector<bool> isGpu;
  std::vector<int> rowLine;                     // 1-based line of each device's row
  std::vector<std::vector<PathClass>> cls;      // [row][column], symmetric
  std::vector<std::vector<int>> nvlinks;        // NV# link counts, else 0
  std::vector<std::string> cpus;                // "CPU Affinity" of GPU rows, "" unknown
  std::vector<int> numa;                        // "NUMA Affinity" of GPU rows, -1 unknown
  std::map<std::string, std::string> nicNames;  // "NIC Legend": NIC0 -> mlx5_0
};

// Fails with a message naming the line, row, column or pair at fault.
Status readNvidiaSmiMatrix(const std::string& text, SmiMatrix* out);

// "0-15,32-47", "7": what CPU Affinity holds (a Linux cpulist).
bool isCpuList(const std::string& text);

}  // namespace lanes::topo
