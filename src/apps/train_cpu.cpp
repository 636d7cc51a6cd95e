// train_cpu: train any method on the CPU (Eigen + OpenMP, float32).
//   make train_cpu && ./train_cpu --method standard
//   ./train_cpu --resume runs/standard-tiny          # continue from its latest checkpoint
#include "train/cpu_instances.h"
#include "train/train_main.h"

int main(int argc, char** argv) {
  return ada::train_main<ada::CpuBackend<float>>(
      argc, argv, "train_cpu", "Train a language model with an adaptive-computation method on the CPU.", "tiny");
}
