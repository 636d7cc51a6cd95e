// CUDA graphs (cuda/step_graph.h, train_gpu --cuda-graph 1) under the host
// runner: the runner's graph API (cuda/hostrun/graph.cpp) against what CUDA
// specifies, StepGraph's recording, caching and updating, and whole training
// steps of every method that says it can be recorded (Method::graph_safe),
// which must give bit-identical losses, statistics and parameters to the
// same steps launched one kernel at a time. The methods that say they cannot
// must fail at the first read back, with an error naming --cuda-graph.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/rng.h"
#include "cuda_backend.h"
#include "method_test_util.h"
#include "methods/registry.h"
#include "step_graph.h"
#include "train/trainer.h"
#include "workflow_util.h"

namespace {

#if defined(__CUDACC__)
constexpr bool kRealGpu = true;  // built by nvcc: test_gpu on a GPU
#else
constexpr bool kRealGpu = false;  // the host runner: make test
#endif

using ada::Batch;
using Gpu = ada::CudaBackend;

#if !defined(__CUDACC__)  // the runner's own graph API (on a GPU, CUDA's)
__global__ void add_value_kernel(float* y, float a, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] += a;
}

// The node parameters of one add_value_kernel launch; `args` must outlive them.
cudaKernelNodeParams add_node(ada::KernelArgsOf<float*, float, int>& args) {
  cudaKernelNodeParams p{};
  p.func = reinterpret_cast<void*>(add_value_kernel);
  p.gridDim = dim3(1), p.blockDim = dim3(32);
  p.kernelParams = args.pointers();
  p.hostrun_kernel = &args;
  return p;
}

struct DeviceFloats {
  float* p = nullptr;
  explicit DeviceFloats(size_t n) { CUDA_CHECK(cudaMalloc(&p, n * sizeof(float))); }
  ~DeviceFloats() { cudaFree(p); }
};

std::vector<float> read_back(const float* d, size_t n) {
  std::vector<float> h(n);
  CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

// A chain memset -> memcpy from pinned memory -> kernel: parameters are copied
// when a node is added, the exec is a snapshot of its graph, the memcpy reads
// its source when the graph runs, and set-params changes one exec only.
TEST(HostRunGraph, ChainCopiesParametersAndReadsSourcesWhenItRuns) {
  const int n = 8;
  DeviceFloats y(n);
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, n * sizeof(float)), cudaSuccess);
  for (int i = 0; i < n; i++) pinned[i] = 1.0f;

  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaGraphCreate(&g, 0), cudaSuccess);
  cudaGraphNode_t set = nullptr, copy = nullptr, add = nullptr, extra = nullptr;
  cudaMemsetParams mp{};
  mp.dst = y.p, mp.value = 0, mp.elementSize = 1, mp.width = n * sizeof(float), mp.height = 1;
  ASSERT_EQ(cudaGraphAddMemsetNode(&set, g, nullptr, 0, &mp), cudaSuccess);
  ASSERT_EQ(cudaGraphAddMemcpyNode1D(&copy, g, &set, 1, y.p, pinned, n * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  ada::KernelArgsOf<float*, float, int> args(add_value_kernel, ada::LaunchSite(0), y.p, 2.0f, n);
  cudaKernelNodeParams kp = add_node(args);
  ASSERT_EQ(cudaGraphAddKernelNode(&add, g, &copy, 1, &kp), cudaSuccess);
  std::get<1>(args.values) = 100.0f;  // after the node was added: no effect
  // Only chains: a node that does not depend on the last one added is refused.
  EXPECT_EQ(cudaGraphAddMemsetNode(&extra, g, &set, 1, &mp), cudaErrorNotSupported);
  EXPECT_EQ(cudaGraphAddMemsetNode(&extra, g, nullptr, 0, &mp), cudaErrorNotSupported);

  cudaGraphExec_t e = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&e, g, 0), cudaSuccess);
  for (int i = 0; i < n; i++) pinned[i] = 5.0f;  // after instantiation, before the launch: read at the launch
  ASSERT_EQ(cudaGraphLaunch(e, nullptr), cudaSuccess);
  for (float v : read_back(y.p, n)) EXPECT_EQ(v, 7.0f);

  // Setting the kernel node's arguments in the exec; the graph keeps its own.
  ada::KernelArgsOf<float*, float, int> args2(add_value_kernel, ada::LaunchSite(0), y.p, -1.0f, n);
  cudaKernelNodeParams kp2 = add_node(args2);
  ASSERT_EQ(cudaGraphExecKernelNodeSetParams(e, add, &kp2), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(e, nullptr), cudaSuccess);
  for (float v : read_back(y.p, n)) EXPECT_EQ(v, 4.0f);
  cudaGraphExec_t e2 = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&e2, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(e2, nullptr), cudaSuccess);
  for (float v : read_back(y.p, n)) EXPECT_EQ(v, 7.0f) << "the graph's own node keeps +2";

  // An exec's node keeps its kind and kernel.
  EXPECT_EQ(cudaGraphExecMemsetNodeSetParams(e, add, &mp), cudaErrorInvalidValue);
  ada::KernelArgsOf<float*, float, int> other(add_value_kernel, ada::LaunchSite(0), y.p, 0.0f, n);
  cudaKernelNodeParams kp3 = add_node(other);
  kp3.func = reinterpret_cast<void*>(&read_back);
  EXPECT_EQ(cudaGraphExecKernelNodeSetParams(e, add, &kp3), cudaErrorInvalidValue);
  // The memcpy node's source, set: a host buffer of the same size.
  std::vector<float> twos(n, 2.0f);
  float* pinned2 = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned2, n * sizeof(float)), cudaSuccess);
  std::memcpy(pinned2, twos.data(), n * sizeof(float));
  ASSERT_EQ(cudaGraphExecMemcpyNodeSetParams1D(e, copy, y.p, pinned2, n * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(e, nullptr), cudaSuccess);
  for (float v : read_back(y.p, n)) EXPECT_EQ(v, 1.0f);

  cudaGraphExecDestroy(e2);
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  cudaFreeHost(pinned2);
  cudaFreeHost(pinned);
}

// A stream being recorded takes no direct work and nothing synchronous runs,
// as CUDA refuses them on a capturing stream (global mode).
TEST(HostRunGraph, RecordingStreamRefusesDirectWork) {
  cudaStream_t s = nullptr, other = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&other), cudaSuccess);
  DeviceFloats y(4);
  float h[4] = {0, 0, 0, 0};
  ada::hostrun::set_stream_recording(s, true);
  EXPECT_EQ(cudaMemsetAsync(y.p, 0, sizeof h, s), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaMemcpyAsync(y.p, h, sizeof h, cudaMemcpyHostToDevice, s), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaMemcpy(h, y.p, sizeof h, cudaMemcpyDeviceToHost), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaMemsetAsync(y.p, 0, sizeof h, other), cudaSuccess);  // another stream: fine
  ada::hostrun::set_stream_recording(s, false);
  EXPECT_EQ(cudaMemcpy(h, y.p, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaGetLastError();
  cudaStreamDestroy(other);
  cudaStreamDestroy(s);
}

#endif  // !__CUDACC__

// Uploads, kernels and copies recorded through the backend: the same results
// as eager launches, one graph built for one shape, updated in place while
// the data changes, a second for a second shape, both kept.
TEST(StepGraph, RecordsBuildsOnceAndUpdates) {
  Gpu be(ada::cuda::GemmPrecision::Fp32);
  const int big = 300, small = 40;
  ada::DeviceArray<Gpu, float> x(be, big), y(be, big), z(be, big);
  auto step = [&](int n, int k) {
    std::vector<float> h(n);
    for (int i = 0; i < n; i++) h[i] = static_cast<float>(i * k);
    be.to_device(x.data(), h.data(), n);  // staged in the recorder's pinned buffers
    be.memset_zero(y.data(), n * sizeof(float));
    be.axpy(y.data(), static_cast<float>(k), x.data(), n);  // y = k x: an argument that changes every step
    be.add(y.data(), y.data(), x.data(), n);                // y = (k + 1) x
    be.copy(z.data(), y.data(), n);
  };
  std::vector<float> want(big), got(big);
  for (int k = 1; k <= 5; k++) {
    const int n = k == 3 ? small : big;  // step 3 has another shape
    be.graph_begin();
    EXPECT_TRUE(be.graph_recording());
    step(n, k);
    be.graph_end();
    EXPECT_FALSE(be.graph_recording());
    be.to_host(got.data(), z.data(), n);
    for (int i = 0; i < n; i++) ASSERT_EQ(got[i], static_cast<float>((k + 1) * i * k)) << "step " << k << " element " << i;
  }
  const ada::StepGraph::Stats& st = *be.graph_stats();
  EXPECT_EQ(st.launches, 5);
  EXPECT_EQ(st.builds, 2) << "one graph per shape, reused";
  EXPECT_GT(st.copy_updates, 0) << "the uploads' sources alternate between two pinned sets";
  EXPECT_GE(st.kernel_updates, 3) << "axpy's alpha changes every step";
  // Eager again: the same backend works without graphs after them.
  step(big, 7);
  be.to_host(got.data(), z.data(), big);
  EXPECT_EQ(got[10], 560.0f);
}

TEST(StepGraph, ReadingBackWhileRecordingIsRefused) {
  Gpu be(ada::cuda::GemmPrecision::Fp32);
  ada::DeviceArray<Gpu, float> x(be, 16);
  be.memset_zero(x.data(), 16 * sizeof(float));
  float h[16];
  be.graph_begin();
  try {
    be.to_host(h, x.data(), 16);
    FAIL() << "to_host while recording must fail";
  } catch (const ada::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--cuda-graph"), std::string::npos) << e.what();
  }
  EXPECT_THROW(be.sync(), ada::Error);
  EXPECT_THROW(be.sum(x.data(), 16), ada::Error);
  be.graph_abandon();
  be.to_host(h, x.data(), 16);  // fine again
  EXPECT_EQ(h[3], 0.0f);
}

// method_test_util.h's random batch, with a position that has no target
Batch random_batch(int B, int T, int V, uint64_t seed) {
  Batch b = ada::test::random_batch(B, T, V, seed);
  b.targets[3] = -1;
  return b;
}

struct Trajectory {
  std::vector<double> loss, ce;
  std::vector<std::vector<std::pair<std::string, double>>> halting;
  std::vector<float> params;
  ada::StepGraph::Stats graph;
};

// Three AdamW steps on three batches, as the trainer runs them (arena reset,
// zero grads, forward and backward, AdamW, statistics), with the forward and
// backward recorded as a graph or launched one by one.
Trajectory train(const std::string& name, const ada::MethodOptions& mo, bool graphs, bool recompute_logits) {
  Gpu be(ada::cuda::GemmPrecision::Fp32);
  be.set_deterministic(kRealGpu);  // no float atomics: bit-identical runs on a GPU too
  auto method = ada::make_method<Gpu>(name, mo);
  method->set_run_seed(11);
  auto model = ada::make_model(be, ada::preset_config("test"), *method);
  model->recompute_logits = recompute_logits;
  model->init_params(3);
  const size_t n = model->num_params();
  ada::DeviceArray<Gpu, float> m(be, n), v(be, n);
  be.memset_zero(m.data(), n * sizeof(float));
  be.memset_zero(v.data(), n * sizeof(float));
  Trajectory t;
  const int steps = 3;
  for (int s = 0; s < steps; s++) {
    method->set_step(s, steps);
    const Batch b = random_batch(2, 7, model->cfg.vocab, 100 + s);
    model->arena.reset();
    model->zero_grads();
    if (graphs) be.graph_begin();
    method->forward(*model, b, true);
    method->backward(*model, 1.0);
    if (graphs) be.graph_end();
    ada::AdamWHyper h;
    h.lr = 1e-2, h.step = s + 1;
    be.adamw_step(model->params.data(), model->grads.data(), m.data(), v.data(), n, model->layout.decay_count(), h,
                  1.0);
    const ada::StepStats st = method->stats(*model);
    t.loss.push_back(st.loss), t.ce.push_back(st.ce), t.halting.push_back(st.halting);
  }
  t.params.resize(n);
  be.to_host(t.params.data(), model->params.data(), n);
  if (graphs) t.graph = *be.graph_stats();
  return t;
}

struct GraphCase {
  std::string label, method;
  ada::MethodOptions opts;
  bool recompute_logits = false;
};
void PrintTo(const GraphCase& c, std::ostream* os) { *os << c.label; }

std::vector<GraphCase> graph_cases() {
  ada::MethodOptions mo;
  mo.iters = 2, mo.ponder_steps = 2, mo.pauses = 2;
  std::vector<GraphCase> v;
  for (const std::string& name : ada::method_names()) v.push_back({name, name, mo, false});
  ada::MethodOptions own = mo;
  own.pause_positions = "own";
  v.push_back({"pause_own_positions", "pause", own, false});
  ada::MethodOptions warm = mo;
  warm.cyb.warmup = 2;  // the anytime loss for steps 0-1, then the stopping-time loss: two shapes
  v.push_back({"cyb_warmup", "cyb", warm, false});
  v.push_back({"ponder_recompute_logits", "ponder", mo, true});
  v.push_back({"cyb_recompute_logits", "cyb", mo, true});
  return v;
}

class CudaGraphStep : public ::testing::TestWithParam<GraphCase> {};

TEST_P(CudaGraphStep, RecordedStepsMatchEagerOnesBitForBit) {
  const GraphCase& c = GetParam();
  auto probe = ada::make_method<Gpu>(c.method, c.opts);
  if (!probe->graph_safe()) {
    // It must say why at its first read back, not run wrong.
    try {
      train(c.method, c.opts, true, c.recompute_logits);
      FAIL() << c.label << " says it cannot be recorded, yet three recorded steps ran";
    } catch (const ada::Error& e) {
      EXPECT_NE(std::string(e.what()).find("--cuda-graph"), std::string::npos) << e.what();
    }
    return;
  }
  const Trajectory eager = train(c.method, c.opts, false, c.recompute_logits);
  const Trajectory graph = train(c.method, c.opts, true, c.recompute_logits);
  EXPECT_EQ(graph.loss, eager.loss);
  EXPECT_EQ(graph.ce, eager.ce);
  EXPECT_EQ(graph.halting, eager.halting);
  ASSERT_EQ(graph.params.size(), eager.params.size());
  EXPECT_EQ(std::memcmp(graph.params.data(), eager.params.data(), eager.params.size() * sizeof(float)), 0)
      << "parameters after three steps differ";
  EXPECT_EQ(graph.graph.launches, 3);
  EXPECT_GE(graph.graph.builds, 1);
  EXPECT_LE(graph.graph.builds, 3);
  EXPECT_GT(graph.graph.nodes, 10u);
  if (std::getenv("ADA_VERBOSE"))
    std::printf("  %-26s %zu nodes, %lld builds, %lld kernel / %lld copy updates over 3 steps\n", c.label.c_str(),
                graph.graph.nodes, graph.graph.builds, graph.graph.kernel_updates, graph.graph.copy_updates);
}

INSTANTIATE_TEST_SUITE_P(Methods, CudaGraphStep, ::testing::ValuesIn(graph_cases()),
                         [](const ::testing::TestParamInfo<GraphCase>& i) { return i.param.label; });

// The trainer with --cuda-graph 1 (CudaBackend::set_step_graphs): two
// micro-batches per step and evaluations between steps (eager work between
// the graphs); the same losses, step by step, as without graphs.
TEST(CudaGraphTrainer, SameLossesWithAndWithoutGraphs) {
  const ada::Dataset d = ada::test::toy_data();
  for (const std::string method : {"standard", "cyb"}) {
    std::vector<double> losses[2];
    double val[2] = {0, 0};
    for (int graphs = 0; graphs < 2; graphs++) {
      const std::string dir = ada::test::scratch_dir("cuda_graph_trainer_" + method + std::to_string(graphs));
      ada::TrainOptions o = ada::test::toy_options(dir + "/run", method, 6);
      o.accum = 2, o.eval_every = 3;
      Gpu be(ada::cuda::GemmPrecision::Fp32);
      be.set_deterministic(kRealGpu);
      be.set_step_graphs(graphs == 1);
      ada::Trainer<Gpu> t(be, o);
      const ada::TrainResult r = t.run(d, false);
      losses[graphs] = r.losses, val[graphs] = r.final_val_loss;
      if (graphs) {
        ASSERT_NE(be.graph_stats(), nullptr);
        EXPECT_EQ(be.graph_stats()->launches, 12) << method << ": 6 steps x 2 micro-batches";
        EXPECT_LE(be.graph_stats()->builds, 2) << method;
      } else {
        EXPECT_EQ(be.graph_stats(), nullptr) << method << ": no graph without --cuda-graph";
      }
    }
    EXPECT_EQ(losses[1], losses[0]) << method;
    EXPECT_EQ(val[1], val[0]) << method;
  }
}

// A method that reads back mid-step is refused before anything runs.
TEST(CudaGraphTrainer, MethodsThatDecideOnTheHostAreRefused) {
  for (const std::string& method : ada::method_names()) {
    auto m = ada::make_method<Gpu>(method, ada::MethodOptions());
    if (m->graph_safe()) continue;
    ada::TrainOptions o = ada::test::toy_options(ada::test::scratch_dir("cuda_graph_refused") + "/run", method, 2);
    Gpu be(ada::cuda::GemmPrecision::Fp32);
    be.set_step_graphs(true);
    ada::test::expect_error([&] { ada::Trainer<Gpu> t(be, o); }, {"--cuda-graph 1", method});
  }
}

// The 70m model's training step, recorded but never launched (recording runs
// only the host code, so the 70m shapes cost the host runner little more
// than the arena): how many kernels, copies and memsets one micro-batch
// queues, what --cuda-graph 1 turns into one launch. The first recording
// differs from later ones (the arena's first blocks are zeroed one memset
// each; merged, they take one); the second and third must agree node for
// node. make test runs standard and cyb; ADA_GRAPH_COUNT_METHODS=all every
// graph-safe method, and ADA_VERBOSE=1 prints the counts (docs/benchmarks.md).
TEST(StepGraph, SeventyMStepNodeCounts) {
  std::vector<std::string> methods = {"standard", "cyb"};
  const char* all = std::getenv("ADA_GRAPH_COUNT_METHODS");
  if (all && std::string(all) == "all") methods = {"standard", "looped", "ponder", "pause", "cyb", "ponderlm2"};
  for (const std::string& name : methods) {
    Gpu be;  // the default GEMM path (bf16 tensor cores), as train_gpu
    auto method = ada::make_method<Gpu>(name, ada::MethodOptions());
    ASSERT_TRUE(method->graph_safe()) << name;
    auto model = ada::make_model(be, ada::preset_config("70m"), *method);
    model->classifier_chunk_rows = 0;  // train_gpu's chunks (667 rows), not the tests' 5 (test_environment.cpp)
    const int T = name == "cyb" ? 512 : 1024;  // CYB: T x 4 steps within the context
    const Batch b = random_batch(1, T, model->cfg.vocab, 1);
    size_t nodes[3] = {0, 0, 0};
    for (int rep = 0; rep < 3; rep++) {
      model->arena.reset();
      be.graph_begin();
      method->set_step(0, 10);
      method->forward(*model, b, true);
      method->backward(*model, 1.0);
      nodes[rep] = be.graph_recorded();
      be.graph_abandon();
    }
    EXPECT_GT(nodes[1], 100u) << name;
    EXPECT_EQ(nodes[2], nodes[1]) << name << ": the same step must record the same nodes";
    if (std::getenv("ADA_VERBOSE"))
      std::printf("  70m B1 T%d %-10s %zu nodes per micro-batch (first step: %zu)\n", T, name.c_str(), nodes[1],
                  nodes[0]);
  }
}

}  // namespace
