// Double binary tree (NCCL's): the buffer's two halves each go up one binary
// tree and back down it. For an all-reduce the second tree is the first
// mirrored (an even number of ranks) or shifted by one (odd), so a rank that
// is an inner node of one tree is a leaf of the other and every rank's links
// carry about one half's heavy work. Reduce and broadcast keep both trees
// rooted at the root: the second reflects the other ranks around it.
//
// Steps are global phases: a message's send and its receive sit at the same
// step number on both ranks, and a rank runs its steps in order, so in step
// s a rank waits only for work of step s. Within a step, data flows along
// tree edges of one tree and chunk, and ops to one peer queue in the same
// (tree, chunk) order on both ends, so waits never form a cycle. A node
// takes its two children in two steps (the first child's sum is complete in
// `acc` before the second's streams through it on the way up) and hands the
// result to its two children in two steps (the first streams on as it
// arrives; the second gets the finished buffer). Each half is cut into
// chunks whose steps are offset by one, so chunks pipeline through the tree.
#include "algorithms/tree.h"

#include <algorithm>
#include <map>
#include <vector>

#include "algorithms/schedule_builder.h"

namespace lanes::algo {

int treeChunks(size_t bytes) {
  constexpr size_t kChunkBytes = size_t{64} << 10;
  return static_cast<int>(std::clamp<size_t>(bytes / 2 / kChunkBytes, 1, 16));
}

namespace {

struct Node {
  int parent = -1;
  std::vector<int> children;  // at most two, ascending
};

// The in-order binary tree over 0..n-1 rooted at 0: rank v's parent is found
// from its lowest set bit (NCCL's construction), so leaves are the odd ranks
// and depth is about log2(n).
std::vector<Node> binaryTree(int n) {
  std::vector<Node> t(static_cast<size_t>(n));
  for (int v = 1; v < n; ++v) {
    const int bit = v & -v;
    int up = (v ^ bit) | (bit << 1);
    if (up >= n) up = v ^ bit;
    t[static_cast<size_t>(v)].parent = up;
  }
  for (int v = 1; v < n; ++v)
    t[static_cast<size_t>(t[static_cast<size_t>(v)].parent)].children.push_back(v);
  return t;
}

// The same tree with every rank renamed by `map` (a permutation).
template <typename Map>
std::vector<Node> renamed(const std::vector<Node>& t, Map map) {
  std::vector<Node> out(t.size());
  for (size_t v = 0; v < t.size(); ++v) {
    const int to = map(static_cast<int>(v));
    out[static_cast<size_t>(to)].parent = t[v].parent < 0 ? -1 : map(t[v].parent);
  }
  for (size_t v = 0; v < out.size(); ++v)
    if (out[v].parent >= 0)
      out[static_cast<size_t>(out[v].parent)].children.push_back(static_cast<int>(v));
  return out;
}

// The two trees of `coll` over real ranks.
std::vector<Node> treeOf(CollType coll, int n, int root, int which) {
  const bool rooted = coll != CollType::AllReduce;
  const std::vector<Node> base = binaryTree(n);
  if (rooted) {
    // Virtual rank 0 is the root; the second tree reflects 1..n-1.
    return renamed(base, [&](int v) {
      const int reflected = which == 0 ? v : (n - v) % n;
      return (reflected + root) % n;
    });
  }
  if (which == 0) return base;
  if (n % 2 == 0) return renamed(base, [&](int v) { return n - 1 - v; });
  return renamed(base, [&](int v) { return (v + 1) % n; });
}

int rootOf(const std::vector<Node>& t) {
  for (size_t v = 0; v < t.size(); ++v)
    if (t[v].parent < 0) return static_cast<int>(v);
  return 0;
}

// When each node's sum goes up (`up`) and its result comes down (`down`),
// and the order it takes its children in each direction.
struct Timing {
  std::vector<int> up, down;
  std::vector<std::vector<int>> upOrder, downOrder;
  int upSteps = 0, downSteps = 0;
};

// The earliest step each node's sum can be complete (into *nat): a leaf's at
// once; with one child, in the child's step; with two, the later of theirs,
// one more where they tie (a node takes one child per step, the earlier
// first). Also each node's height (into *heights) and its up order.
void natural(const std::vector<Node>& t, int v, std::vector<int>* nat, std::vector<int>* heights,
             Timing* tm) {
  const auto& c = t[static_cast<size_t>(v)].children;
  int& mine = (*nat)[static_cast<size_t>(v)];
  for (int child : c) {
    natural(t, child, nat, heights, tm);
    (*heights)[static_cast<size_t>(v)] =
        std::max((*heights)[static_cast<size_t>(v)], 1 + (*heights)[static_cast<size_t>(child)]);
  }
  auto& order = tm->upOrder[static_cast<size_t>(v)];
  order = c;
  if (c.size() < 2) {
    mine = c.empty() ? 0 : (*nat)[static_cast<size_t>(c[0])];
    return;
  }
  const int a = (*nat)[static_cast<size_t>(c[0])], b = (*nat)[static_cast<size_t>(c[1])];
  if (b < a) std::swap(order[0], order[1]);
  mine = std::max(a, b) + (a == b ? 1 : 0);
}

Timing timingOf(const std::vector<Node>& t, bool up, bool down) {
  const size_t n = t.size();
  Timing tm;
  tm.up.assign(n, 0);
  tm.down.assign(n, 0);
  tm.upOrder.assign(n, {});
  tm.downOrder.assign(n, {});
  const int root = rootOf(t);
  std::vector<int> nat(n, 0), heights(n, 0);
  natural(t, root, &nat, &heights, &tm);
  int upEnd = -1;
  if (up) {
    // Top-down: the root completes at its natural step; a node's last child
    // sends in the node's step, its first child at its own natural step.
    std::vector<int> stack = {root};
    tm.up[static_cast<size_t>(root)] = nat[static_cast<size_t>(root)];
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      const auto& order = tm.upOrder[static_cast<size_t>(v)];
      for (size_t i = 0; i < order.size(); ++i) {
        const int c = order[i];
        tm.up[static_cast<size_t>(c)] =
            i + 1 == order.size() ? tm.up[static_cast<size_t>(v)] : nat[static_cast<size_t>(c)];
        stack.push_back(c);
      }
    }
    upEnd = tm.up[static_cast<size_t>(root)];
    tm.upSteps = upEnd + 1;
  }
  if (down) {
    // The root sends to all its children in one step; any other node streams
    // to its deeper child as the result arrives and sends to the other next.
    const int start = upEnd + 1;
    std::vector<int> stack = {root};
    tm.down[static_cast<size_t>(root)] = start;
    int last = start;
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      std::vector<int> order = t[static_cast<size_t>(v)].children;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return heights[static_cast<size_t>(a)] > heights[static_cast<size_t>(b)];
      });
      tm.downOrder[static_cast<size_t>(v)] = order;
      for (size_t i = 0; i < order.size(); ++i) {
        const int d = tm.down[static_cast<size_t>(v)] + (v == root ? 0 : static_cast<int>(i));
        tm.down[static_cast<size_t>(order[i])] = d;
        last = std::max(last, d);
        stack.push_back(order[i]);
      }
    }
    tm.downSteps = last - start + 1;
  }
  return tm;
}

// One rank's part of one tree, for the bytes [off, off + bytes) of each
// chunk: ops placed at their global step.
struct Part {
  const std::vector<Node>* tree;
  const Timing* timing;
  size_t off, bytes;
  int shift;  // the chunk's offset in steps
};

using Steps = std::map<int, Step>;

void emitUp(const Part& p, int me, const void* own, void* acc, Steps* steps) {
  const Node& node = (*p.tree)[static_cast<size_t>(me)];
  const auto& order = p.timing->upOrder[static_cast<size_t>(me)];
  const int mine = p.timing->up[static_cast<size_t>(me)] + p.shift;
  const void* src = at(own, p.off);
  void* dst = at(acc, p.off);
  if (order.empty()) {
    if (node.parent >= 0) addSend((*steps)[mine], node.parent, src, p.bytes);
    return;
  }
  if (order.size() == 2) {
    const int first = order[0];
    addRecvReduce((*steps)[p.timing->up[static_cast<size_t>(first)] + p.shift], first, dst, src,
                  p.bytes);
    src = dst;
  }
  const int last = order.back();
  if (node.parent >= 0)
    addRecvReduceSend((*steps)[mine], last, node.parent, dst, src, p.bytes);
  else
    addRecvReduce((*steps)[mine], last, dst, src, p.bytes);
}

void emitDown(const Part& p, int me, const void* rootData, void* buf, Steps* steps) {
  const Node& node = (*p.tree)[static_cast<size_t>(me)];
  const auto& order = p.timing->downOrder[static_cast<size_t>(me)];
  const int mine = p.timing->down[static_cast<size_t>(me)] + p.shift;
  void* dst = at(buf, p.off);
  if (node.parent < 0) {
    for (int c : order) addSend((*steps)[mine], c, at(rootData, p.off), p.bytes);
    return;
  }
  if (order.empty()) {
    addRecv((*steps)[mine], node.parent, dst, p.bytes);
    return;
  }
  addRecvSend((*steps)[mine], node.parent, order[0], dst, p.bytes);
  if (order.size() == 2) addSend((*steps)[mine + 1], order[1], dst, p.bytes);
}

}  // namespace

TreeDepth treeDepth(CollType coll, int nranks) {
  if (nranks <= 1) return {};
  const std::vector<Node> t = treeOf(coll, nranks, 0, 0);
  const Timing tm = timingOf(t, coll != CollType::Broadcast, coll != CollType::Reduce);
  // Per rank, over both trees: the half-buffers its core copies (each send,
  // and what comes down from a parent) and reduces (what each child sends).
  std::vector<int> copies(static_cast<size_t>(nranks), 0), reduces(static_cast<size_t>(nranks), 0);
  for (int which = 0; which < 2; ++which) {
    const std::vector<Node> tree = which == 0 ? t : treeOf(coll, nranks, 0, which);
    for (size_t v = 0; v < tree.size(); ++v) {
      const int c = static_cast<int>(tree[v].children.size());
      const int parent = tree[v].parent >= 0 ? 1 : 0;
      copies[v] += c + 2 * parent;
      reduces[v] += c;
    }
  }
  // Each edge costs a rank two half-buffers (one each way), so the busiest
  // rank is also the one with the most edges.
  size_t busiest = 0;
  for (size_t v = 1; v < copies.size(); ++v)
    if (copies[v] + reduces[v] > copies[busiest] + reduces[busiest]) busiest = v;
  return {tm.upSteps, tm.downSteps, (copies[busiest] + reduces[busiest]) / 2, copies[busiest],
          reduces[busiest]};
}

Status buildTree(const CollArgs& a, Schedule* out) {
  beginSchedule(a, "tree", out);
  if (a.coll != CollType::AllReduce && a.coll != CollType::Reduce && a.coll != CollType::Broadcast)
    return invalidUsage(std::string("the tree algorithm does not implement ") +
                        collTypeName(a.coll) + "; choose another algorithm.");
  const size_t elem = datatypeSize(a.type);
  const size_t bytes = a.count * elem;
  const int n = a.nranks, r = a.rank;
  if (bytes == 0) return Status::ok();
  if (n == 1) {
    localCopySchedule(a.send, a.recv, bytes, out);
    return Status::ok();
  }
  const bool up = a.coll != CollType::Broadcast, down = a.coll != CollType::Reduce;
  // Where a node's partial sums live: the result buffer where it has one
  // (every rank of an all-reduce, the root of a reduce), else scratch.
  const bool hasResult = a.coll == CollType::AllReduce || r == a.root;
  void* acc = hasResult ? a.recv : nullptr;
  if (a.coll == CollType::Reduce && !hasResult) acc = out->allocScratch(bytes);
  Steps steps;
  if (a.coll == CollType::Broadcast && r == a.root) addCopy(steps[-1], a.recv, a.send, bytes);
  const int chunks = treeChunks(bytes);
  const Segments halves{a.count, 2};
  for (int which = 0; which < 2; ++which) {
    const std::vector<Node> tree = treeOf(a.coll, n, a.root, which);
    const Timing timing = timingOf(tree, up, down);
    const Segments pieces{halves.size(which), chunks};
    for (int k = 0; k < chunks; ++k) {
      const Part p{&tree, &timing, (halves.offset(which) + pieces.offset(k)) * elem,
                   pieces.size(k) * elem, k};
      if (up) emitUp(p, r, a.send, acc, &steps);
      // An all-reduce's result is in recvbuff wherever the up phase left it;
      // a broadcast's root sends from its input.
      if (down) emitDown(p, r, a.coll == CollType::Broadcast ? a.send : a.recv, a.recv, &steps);
    }
  }
  for (auto& [step, ops] : steps)
    if (!ops.ops.empty()) out->steps.push_back(std::move(ops));
  return Status::ok();
}

}  // namespace lanes::algo
