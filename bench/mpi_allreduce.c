/* MPI_Allreduce time for 1 to 64 MB of floats: OpenMPI's all-reduce as a
 * peer of Ringmaster's. Every rank starts each timed call together (after
 * MPI_Barrier); rank 0 prints one JSON line per size with the median.
 * With 2 ranks it also times MPI_Sendrecv of the whole buffer with the
 * other rank: n bytes each way at once, what any all-reduce of n bytes
 * between two ranks must move, with nothing summed ("exchange_seconds").
 * bench/multihost.py compiles it with mpicc and runs it with mpirun.
 *
 *   mpicc -O2 -o mpi_allreduce bench/mpi_allreduce.c
 *   mpirun -np 2 ./mpi_allreduce [iterations]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int compare(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* times, int count) {
  qsort(times, count, sizeof(double), compare);
  return times[count / 2];
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int iterations = argc > 1 ? atoi(argv[1]) : 20;
  double* times = malloc(sizeof(double) * iterations);
  for (int mb = 1; mb <= 64; mb *= 2) {
    const size_t n = (size_t)mb << 18;
    float* data = malloc(n * sizeof(float));
    float* received = malloc(n * sizeof(float));
    for (int it = -2; it < iterations; ++it) { /* two warm-up rounds */
      for (size_t i = 0; i < n; ++i) data[i] = 1.0f;
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, data, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (it >= 0) times[it] = MPI_Wtime() - start;
    }
    const double allreduce = median(times, iterations);
    double exchange = 0;
    if (size == 2) {
      for (int it = -2; it < iterations; ++it) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        MPI_Sendrecv(data, (int)n, MPI_FLOAT, 1 - rank, 0, received, (int)n, MPI_FLOAT, 1 - rank, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (it >= 0) times[it] = MPI_Wtime() - start;
      }
      exchange = median(times, iterations);
    }
    if (rank == 0) {
      printf("{\"bytes\": %zu, \"mpi_seconds\": %.6f, \"exchange_seconds\": %.6f}\n",
             n * sizeof(float), allreduce, exchange);
      fflush(stdout);
    }
    free(received);
    free(data);
  }
  free(times);
  MPI_Finalize();
  return 0;
}
