/* VLFeat side of fisherkit's benchmark (scripts/bench.py compiles and runs it).
 *
 *   vlfeat_bench em X.npy W.npy MU.npy VAR.npy THREADS REPS OUT_MEANS.npy
 *   vlfeat_bench fv BAGS.npy W.npy MU.npy VAR.npy THREADS REPS OUT_FV0.npy
 *
 * Inputs are .npy files written by bench.py: little-endian float32, C order
 * (X: (N, D) descriptors; BAGS: (B, M, D), B bags of M descriptors; W: (K);
 * MU, VAR: (K, D)). Prints one JSON object on stdout.
 *
 * em: one EM iteration of vl_gmm_cluster from the given initialisation
 * (VlGMMCustom). VLFeat's loop runs E-step, then stops if the iteration
 * count reached the maximum, else runs the M-step and loops: with
 * max_num_iterations = 1 it runs E, M, E; with 0 it runs E only. The time of
 * one iteration (E + M) is therefore the median time of the max = 1 run minus
 * the median time of the max = 0 run; both are reported. The means after the
 * max = 1 run (one M-step from the initial model) are written to OUT_MEANS.
 *
 * fv: vl_fisher_encode(..., VL_FISHER_FLAG_IMPROVED) on every bag, REPS
 * passes; per-bag time = median pass time / B. The encoding of bag 0 is
 * written to OUT_FV0 (2 K D floats, VLFeat layout).
 *
 * Threads: vl_set_num_threads (VLFeat's OpenMP loops). */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vl/fisher.h>
#include <vl/generic.h>
#include <vl/gmm.h>

typedef struct {
  float *data;
  size_t shape[3];
  int ndim;
} Npy;

static void die(const char *msg, const char *what) {
  fprintf(stderr, "vlfeat_bench: %s%s%s\n", msg, what ? ": " : "", what ? what : "");
  exit(2);
}

/* Reads a float32 C-order .npy file (format versions 1-3). */
static Npy read_npy(const char *path) {
  Npy a;
  FILE *f = fopen(path, "rb");
  unsigned char pre[10];
  uint32_t hlen;
  char *hdr, *p;
  size_t count = 1, got;
  int i;
  memset(&a, 0, sizeof a);
  if (!f) die("cannot open", path);
  if (fread(pre, 1, 8, f) != 8 || memcmp(pre, "\x93NUMPY", 6) != 0) die("not an .npy file", path);
  if (pre[6] == 1) {
    if (fread(pre + 8, 1, 2, f) != 2) die("truncated header", path);
    hlen = (uint32_t)pre[8] | ((uint32_t)pre[9] << 8);
  } else {
    unsigned char b[4];
    if (fread(b, 1, 4, f) != 4) die("truncated header", path);
    hlen = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
  }
  hdr = malloc(hlen + 1);
  if (!hdr || fread(hdr, 1, hlen, f) != hlen) die("truncated header", path);
  hdr[hlen] = 0;
  if (!strstr(hdr, "'descr': '<f4'")) die("dtype must be little-endian float32", path);
  if (!strstr(hdr, "'fortran_order': False")) die("array must be in C order", path);
  p = strstr(hdr, "'shape': (");
  if (!p) die("no shape in header", path);
  p += strlen("'shape': (");
  while (*p && *p != ')') {
    char *end;
    unsigned long v = strtoul(p, &end, 10);
    if (end == p) break;
    if (a.ndim == 3) die("more than 3 dimensions", path);
    a.shape[a.ndim++] = v;
    count *= v;
    p = end;
    while (*p == ',' || *p == ' ') p++;
  }
  free(hdr);
  a.data = malloc(count * sizeof(float) + 1);
  if (!a.data) die("out of memory reading", path);
  got = fread(a.data, sizeof(float), count, f);
  if (got != count) die("truncated data", path);
  fclose(f);
  for (i = a.ndim; i < 3; i++) a.shape[i] = 1;
  return a;
}

static void write_npy(const char *path, const float *data, size_t rows, size_t cols) {
  FILE *f = fopen(path, "wb");
  char hdr[128];
  int n;
  uint16_t hlen;
  if (!f) die("cannot write", path);
  n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", rows, cols);
  /* pad so that magic (6) + version (2) + length (2) + header is a multiple of 64 */
  while ((10 + n + 1) % 64 != 0) hdr[n++] = ' ';
  hdr[n++] = '\n';
  hlen = (uint16_t)n;
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fputc(hlen & 0xff, f);
  fputc(hlen >> 8, f);
  fwrite(hdr, 1, (size_t)n, f);
  fwrite(data, sizeof(float), rows * cols, f);
  fclose(f);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void print_times(const char *name, const double *v, int n) {
  int i;
  printf("\"%s\": [", name);
  for (i = 0; i < n; i++) printf("%s%.6f", i ? ", " : "", v[i]);
  printf("]");
}

/* Runs vl_gmm_cluster from the given model with at most `iters` iterations. */
static double time_cluster(VlGMM *gmm, vl_size iters, const Npy *x, const Npy *w, const Npy *mu,
                           const Npy *var) {
  double t0;
  vl_gmm_set_max_num_iterations(gmm, iters);
  vl_gmm_set_priors(gmm, w->data);
  vl_gmm_set_means(gmm, mu->data);
  vl_gmm_set_covariances(gmm, var->data);
  t0 = now();
  vl_gmm_cluster(gmm, x->data, x->shape[0]);
  return now() - t0;
}

int main(int argc, char **argv) {
  Npy x, w, mu, var;
  int threads, reps, r;
  size_t d, k;
  if (argc != 9) {
    fprintf(stderr,
            "usage: vlfeat_bench em X.npy W.npy MU.npy VAR.npy THREADS REPS OUT_MEANS.npy\n"
            "       vlfeat_bench fv BAGS.npy W.npy MU.npy VAR.npy THREADS REPS OUT_FV0.npy\n");
    return 2;
  }
  x = read_npy(argv[2]);
  w = read_npy(argv[3]);
  mu = read_npy(argv[4]);
  var = read_npy(argv[5]);
  threads = atoi(argv[6]);
  reps = atoi(argv[7]);
  if (threads < 1 || reps < 1) die("THREADS and REPS must be >= 1", NULL);
  k = mu.shape[0];
  d = mu.shape[1];
  if (w.shape[0] != k || var.shape[0] != k || var.shape[1] != d) die("inconsistent model shapes", NULL);
  vl_set_num_threads((vl_size)threads);

  if (strcmp(argv[1], "em") == 0) {
    double *t0 = calloc((size_t)reps, sizeof(double)), *t1 = calloc((size_t)reps, sizeof(double));
    double m0, m1;
    VlGMM *gmm;
    if (x.ndim != 2 || x.shape[1] != d) die("X must be (N, D) with the model's D", NULL);
    gmm = vl_gmm_new(VL_TYPE_FLOAT, d, k);
    vl_gmm_set_initialization(gmm, VlGMMCustom);
    vl_gmm_set_covariance_lower_bound(gmm, 1e-4);
    vl_gmm_set_verbosity(gmm, 0);
    /* warm-up on a few rows: let OpenMP start its threads (the data are already in memory) */
    {
      Npy head = x;
      head.shape[0] = x.shape[0] < 2000 ? x.shape[0] : 2000;
      time_cluster(gmm, 0, &head, &w, &mu, &var);
    }
    for (r = 0; r < reps; r++) {
      t0[r] = time_cluster(gmm, 0, &x, &w, &mu, &var);
      t1[r] = time_cluster(gmm, 1, &x, &w, &mu, &var);
    }
    write_npy(argv[8], (const float *)vl_gmm_get_means(gmm), k, d);
    printf("{\"work\": \"gmm-em\", \"threads\": %d, \"max_threads\": %zu, \"n\": %zu, \"d\": %zu, \"k\": %zu, ",
           threads, (size_t)vl_get_max_threads(), x.shape[0], d, k);
    print_times("e_step_s_all", t0, reps);
    printf(", ");
    print_times("e_m_e_s_all", t1, reps);
    m0 = median(t0, reps);
    m1 = median(t1, reps);
    printf(", \"e_step_s\": %.6f, \"e_m_e_s\": %.6f, \"iteration_s\": %.6f, \"loglik\": %.6f}\n", m0, m1,
           m1 - m0, vl_gmm_get_loglikelihood(gmm));
    vl_gmm_delete(gmm);
  } else if (strcmp(argv[1], "fv") == 0) {
    size_t nbags = x.shape[0], m = x.shape[1], len = 2 * d * k, b;
    float *enc = malloc(len * sizeof(float)), *enc0 = malloc(len * sizeof(float));
    double *t = calloc((size_t)reps, sizeof(double)), med;
    if (x.ndim != 3 || x.shape[2] != d) die("BAGS must be (B, M, D) with the model's D", NULL);
    /* warm-up on bag 0, kept for the correctness check */
    vl_fisher_encode(enc0, VL_TYPE_FLOAT, mu.data, d, k, var.data, w.data, x.data, m, VL_FISHER_FLAG_IMPROVED);
    for (r = 0; r < reps; r++) {
      double t0 = now();
      for (b = 0; b < nbags; b++) {
        vl_fisher_encode(enc, VL_TYPE_FLOAT, mu.data, d, k, var.data, w.data, x.data + b * m * d, m,
                         VL_FISHER_FLAG_IMPROVED);
      }
      t[r] = (now() - t0) / (double)nbags;
    }
    write_npy(argv[8], enc0, 1, len);
    printf("{\"work\": \"fv\", \"threads\": %d, \"max_threads\": %zu, \"bags\": %zu, \"bag_size\": %zu, \"d\": %zu, "
           "\"k\": %zu, ",
           threads, (size_t)vl_get_max_threads(), nbags, m, d, k);
    print_times("per_bag_s_all", t, reps);
    med = median(t, reps);
    printf(", \"per_bag_s\": %.6f}\n", med);
    free(enc);
    free(enc0);
    free(t);
  } else {
    die("unknown mode (em or fv)", argv[1]);
  }
  return 0;
}
