// The header decides the columns: devices first (anything named like GPU0,
// NIC0, mlx5_0), then named columns. Rows are split at whitespace (their
// cells hold no spaces), so a paste that lost its tabs still reads; a row
// with fewer cells than the header is a cut line, never a shifted one.
#include "topology/nvidia_smi_matrix.h"

#include <cctype>
#include <cstdlib>
#include <set>
#include <sstream>

namespace lanes::topo {

namespace {

std::string stripAnsi(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b') {
      while (i < s.size() && !std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
      continue;
    }
    if (s[i] != '\r') out += s[i];
  }
  return out;
}

// Markdown tables: "|---|:--|" rows go, the other rows' pipes become cell
// separators.
bool markdownSeparator(const std::string& line) {
  return line.find('|') != std::string::npos &&
         line.find_first_not_of("|-:+ \t") == std::string::npos;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// GPU0, NIC3, mlx5_0, bnxt_re1, ib0: letters, then anything, ending in digits.
bool isDeviceName(const std::string& w) {
  if (w.empty() || !std::isalpha(static_cast<unsigned char>(w[0])) ||
      !std::isdigit(static_cast<unsigned char>(w.back())))
    return false;
  for (char c : w)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

bool isGpuName(const std::string& w) {
  return w.size() > 3 && startsWith(w, "GPU") &&
         w.find_first_not_of("0123456789", 3) == std::string::npos;
}

// Cells of `nvidia-smi topo -p2p` (OK, "Not supported", ...).
bool isP2pStatus(const std::string& w) {
  static const std::set<std::string> kStatus = {"OK", "NS", "CNS", "GNS", "TNS", "U"};
  return kStatus.count(w) > 0;
}

bool isHeader(const std::vector<std::string>& w) {
  return !w.empty() && w[0] == "GPU0" && (w.size() < 2 || w[1] != "X");
}

struct Header {
  int line = 0;
  std::vector<std::string> devices, named;  // device columns, then named ones
};

// Tab-separated header cells are exact; without tabs the known names are
// joined back from their words.
Header parseHeader(const std::string& line, int lineNo) {
  std::vector<std::string> cells;
  if (line.find('\t') != std::string::npos) {
    std::istringstream in(line);
    for (std::string c; std::getline(in, c, '\t');)
      if (!trim(c).empty()) cells.push_back(trim(c));
  } else {
    cells = words(line);
  }
  Header h;
  h.line = lineNo;
  size_t i = 0;
  for (; i < cells.size() && isDeviceName(cells[i]); ++i) h.devices.push_back(cells[i]);
  static const std::vector<std::vector<std::string>> kNamed = {
      {"CPU", "Affinity"}, {"NUMA", "Affinity"}, {"GPU", "NUMA", "ID"}};
  while (i < cells.size()) {
    size_t take = 1;
    std::string name = cells[i];
    for (const auto& n : kNamed) {
      if (i + n.size() > cells.size()) continue;
      bool match = true;
      for (size_t k = 0; k < n.size(); ++k) match = match && cells[i + k] == n[k];
      if (match) {
        take = n.size();
        name.clear();
        for (const auto& part : n) name += (name.empty() ? "" : " ") + part;
      }
    }
    h.named.push_back(name);
    i += take;
  }
  return h;
}

int namedColumn(const Header& h, const char* name) {
  for (size_t i = 0; i < h.named.size(); ++i)
    if (h.named[i] == name) return static_cast<int>(i);
  return -1;
}

std::string at(int line) { return "line " + std::to_string(line); }

// NUMA Affinity: one node, N/A, or (rarely) a list, which says no single node.
bool parseNuma(const std::string& cell, int* out) {
  *out = -1;
  if (cell == "N/A") return true;
  if (!isCpuList(cell)) return false;
  if (cell.find_first_not_of("0123456789") == std::string::npos) *out = std::atoi(cell.c_str());
  return true;
}

}  // namespace

bool isCpuList(const std::string& text) {
  if (text.empty()) return false;
  std::istringstream in(text);
  for (std::string range; std::getline(in, range, ',');) {
    size_t dash = range.find('-');
    std::string lo = range.substr(0, dash),
                hi = dash == std::string::npos ? "" : range.substr(dash + 1);
    auto number = [](const std::string& s) {
      return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!number(lo) || (dash != std::string::npos && !number(hi))) return false;
    if (dash != std::string::npos && std::atol(hi.c_str()) < std::atol(lo.c_str())) return false;
  }
  return text.back() != ',';
}

Status readNvidiaSmiMatrix(const std::string& text, SmiMatrix* out) {
  SmiMatrix m;
  Header h;
  bool haveHeader = false, inRows = false, sawP2p = false, done = false;
  std::istringstream in(stripAnsi(text));
  int lineNo = 0, lastRowLine = 0;
  auto startMatrix = [&](const std::string& line) {
    h = parseHeader(line, lineNo);
    haveHeader = true;
    const size_t n = h.devices.size();
    m = SmiMatrix{};
    m.devices = h.devices;
    m.rowLine.assign(n, 0);
    m.cls.assign(n, std::vector<PathClass>(n, PathClass::Unknown));
    m.nvlinks.assign(n, std::vector<int>(n, 0));
    m.cpus.assign(n, "");
    m.numa.assign(n, -1);
    for (const auto& d : h.devices) m.isGpu.push_back(isGpuName(d));
  };
  std::map<std::string, std::string> nicNames;
  for (std::string line; std::getline(in, line);) {
    ++lineNo;
    if (markdownSeparator(line)) continue;
    for (char& c : line)
      if (c == '|') c = '\t';
    std::vector<std::string> w = words(line);
    if (w.empty()) continue;
    // "NIC Legend" entries ("  NIC0: mlx5_0") follow the matrix.
    if (w.size() == 2 && w[0].size() > 4 && startsWith(w[0], "NIC") && w[0].back() == ':') {
      nicNames[w[0].substr(0, w[0].size() - 1)] = w[1];
      continue;
    }
    if (done) continue;  // past the first matrix: only its NIC Legend counts
    if (inRows && (isHeader(w) || startsWith(w[0], "Legend"))) {
      done = true;  // a second matrix (e.g. -p2p) or the legend
      continue;
    }
    if (isHeader(w)) {
      startMatrix(line);
      continue;
    }
    int d = -1;
    for (size_t i = 0; haveHeader && i < h.devices.size(); ++i)
      if (h.devices[i] == w[0]) d = static_cast<int>(i);
    if (d < 0) {
      done = inRows;  // text after the matrix ends it
      continue;
    }
    const int n = static_cast<int>(h.devices.size());
    const int named = static_cast<int>(h.named.size());
    const int got = static_cast<int>(w.size()) - 1;
    // A `nvidia-smi topo -p2p` matrix: same header, OK/NS cells. Skip it.
    bool p2p = false;
    for (int c = 1; c < static_cast<int>(w.size()) && c <= n; ++c) p2p = p2p || isP2pStatus(w[c]);
    if (p2p) {
      sawP2p = true;
      haveHeader = inRows = false;
      continue;
    }
    if (m.rowLine[d] != 0)
      return invalidArgument(at(lineNo) + ": a second row for " + w[0] + " (the first is on " +
                             at(m.rowLine[d]) + "); paste one matrix");
    // NIC rows stop after the device columns; GPU rows may lack GPU NUMA ID only.
    const int gpuNumaId = namedColumn(h, "GPU NUMA ID");
    const bool lastOptional = m.isGpu[d] && gpuNumaId == named - 1;
    bool fits =
        got == n + named || (!m.isGpu[d] && got == n) || (lastOptional && got == n + named - 1);
    if (!fits) {
      std::string why = got < n + named ? "fewer" : "more";
      return invalidArgument(
          at(lineNo) + ": row " + w[0] + " has " + std::to_string(got) + " cells, " + why +
          " than the " + std::to_string(n + named) + " columns of the header on " + at(h.line) +
          (got < n + named ? "; the line looks cut off (a wrapped or truncated paste?): paste the "
                             "whole matrix as nvidia-smi prints it"
                           : "; is a device column missing from the header?"));
    }
    m.rowLine[d] = lineNo;
    lastRowLine = lineNo;
    inRows = true;
    for (int c = 0; c < n; ++c) {
      const std::string& cell = w[c + 1];
      if (!parsePathName(cell, &m.cls[d][c], &m.nvlinks[d][c]))
        return invalidArgument(at(lineNo) + ", row " + w[0] + ", column " + h.devices[c] + ": \"" +
                               cell + "\" is not a path class (X, PIX, PXB, PHB, NODE, SYS, NV#)");
      if ((m.cls[d][c] == PathClass::Self) != (c == d))
        return invalidArgument(at(lineNo) + ", row " + w[0] + ", column " + h.devices[c] + ": \"" +
                               cell + "\" where " + (c == d ? "X (the device itself)" : "a path") +
                               " belongs; are rows or columns out of order?");
    }
    if (!m.isGpu[d] || got == n) continue;
    const int cpuCol = namedColumn(h, "CPU Affinity"), numaCol = namedColumn(h, "NUMA Affinity");
    if (cpuCol >= 0) {
      const std::string& cell = w[1 + n + cpuCol];
      PathClass ignored;
      int nv;
      if (cell != "N/A" && !isCpuList(cell))
        return invalidArgument(at(lineNo) + ", row " + w[0] + ", column CPU Affinity: \"" + cell +
                               "\" is not a CPU list such as 0-15,32-47" +
                               (parsePathName(cell, &ignored, &nv)
                                    ? " but a path class: the header on " + at(h.line) +
                                          " lists fewer devices than the rows have (a NIC "
                                          "column missing?)"
                                    : ""));
      if (cell != "N/A") m.cpus[d] = cell;
    }
    if (numaCol >= 0 && !parseNuma(w[1 + n + numaCol], &m.numa[d]))
      return invalidArgument(at(lineNo) + ", row " + w[0] + ", column NUMA Affinity: \"" +
                             w[1 + n + numaCol] + "\" is not a NUMA node number or N/A");
  }
  if (!haveHeader && sawP2p)
    return invalidArgument(
        "this is the output of `nvidia-smi topo -p2p` (P2P status: OK, NS, CNS, ...), not of "
        "`nvidia-smi topo -m`; run `nvidia-smi topo -m` and give its output");
  if (!haveHeader || !inRows)
    return invalidArgument(
        "not the output of `nvidia-smi topo -m`: " +
        std::string(haveHeader ? "the header on " + at(h.line) + " is followed by no device rows"
                               : "no header line starting with GPU0 was found"));
  std::string absent;
  for (size_t d = 0; d < m.devices.size(); ++d)
    if (m.rowLine[d] == 0) absent += (absent.empty() ? "" : ", ") + m.devices[d];
  if (!absent.empty())
    return invalidArgument("the matrix ends on " + at(lastRowLine) + " without the rows of " +
                           absent + " (the header on " + at(h.line) +
                           " names them); paste the whole matrix");
  for (size_t a = 0; a < m.devices.size(); ++a)
    for (size_t b = a + 1; b < m.devices.size(); ++b)
      if (m.cls[a][b] != m.cls[b][a] || m.nvlinks[a][b] != m.nvlinks[b][a])
        return invalidArgument(
            m.devices[a] + "->" + m.devices[b] + " is " + pathName(m.cls[a][b], m.nvlinks[a][b]) +
            " (" + at(m.rowLine[a]) + ") but " + m.devices[b] + "->" + m.devices[a] + " is " +
            pathName(m.cls[b][a], m.nvlinks[b][a]) + " (" + at(m.rowLine[b]) +
            "): nvidia-smi prints a symmetric matrix, so the paste was edited or mixes two "
            "machines; paste it again unedited");
  m.nicNames = nicNames;
  *out = std::move(m);
  return Status::ok();
}

}  // namespace lanes::topo
