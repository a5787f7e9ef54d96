/* Fused CPU kernels for the "adam" PA solver (compiled on first use by native.py).
 *
 * Data layout: X[p][i][0..2][0..K) = centred A, B and S = A + B + delta (see kernel.py),
 * delta[p][i].  One OpenMP thread runs one pair at a time, so a pair's minibatch steps touch
 * only its own block of X and results never depend on the number of threads.  Built with
 * -ffast-math so that gcc calls glibc's vectorised exp and log (libmvec); the scores must be
 * finite (pairs with -inf entries use the PyTorch path).  Scratch is a few kilobytes per
 * thread; allocation failures are not checked.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 256 /* rows per vectorised block */

/* Sums over n <= BLOCK rows (each 3K doubles [A, B, S], contiguous) of the parts of k_i:
 *   out[0] += sum_i log z_w,i  (convex in beta: log sum_j exp(beta (A + B)_ij))
 *   out[1] += sum_i log z_a,i + log z_b,i  (convex)
 *   out[2] += sum_i E_a[A_i] + E_b[B_i]  (derivative of out[1])
 *   out[3] += sum_i k_i'(beta) = E_w[S_i] - delta_i - E_a[A_i] - E_b[B_i]
 * so that k = out[0] - out[1].  One long loop takes exp(beta x) of all 3nK entries;
 * exp(beta S), whose row maximum is 1, never underflows, and log z_w = log sum exp(beta S)
 * - beta delta.  With logs == 0 only out[3] is accumulated (no logarithms needed). */
static void block_terms(const double *rows, const double *d, long n, long K, double beta,
                        double *t, int logs, double *out)
{
    double z[3][BLOCK], mean[3][BLOCK];
    long len = n * 3 * K;
    for (long e = 0; e < len; e++) t[e] = exp(beta * rows[e]);
    for (long r = 0; r < n; r++) {
        for (int c = 0; c < 3; c++) {
            const double *x = rows + (r * 3 + c) * K, *w = t + (r * 3 + c) * K;
            double zc = 0, mc = 0;
            for (long j = 0; j < K; j++) {
                zc += w[j];
                mc += w[j] * x[j];
            }
            z[c][r] = zc;
            mean[c][r] = mc / zc;
        }
    }
    double dk = 0;
    for (long r = 0; r < n; r++) dk += mean[2][r] - d[r] - mean[0][r] - mean[1][r];
    out[3] += dk;
    if (!logs) return;
    double f1 = 0, f2 = 0, df2 = 0;
    for (long r = 0; r < n; r++) {
        f1 += log(z[2][r]) - beta * d[r];
        f2 += log(z[0][r]) + log(z[1][r]);
        df2 += mean[0][r] + mean[1][r];
    }
    out[0] += f1;
    out[1] += f2;
    out[2] += df2;
}

/* For each request r: the four sums of block_terms over all N rows of pair pairs[r] at
 * beta[r], written to out[4r .. 4r+3]. */
void pa_terms(const double *X, const double *delta, long N, long K, long R, const long *pairs,
              const double *beta, double *out, int threads)
{
#pragma omp parallel num_threads(threads)
    {
        double *t = malloc(BLOCK * 3 * K * sizeof(double));
#pragma omp for schedule(dynamic, 1)
        for (long r = 0; r < R; r++) {
            const double *xp = X + pairs[r] * N * 3 * K, *dp = delta + pairs[r] * N;
            double *o = out + 4 * r;
            o[0] = o[1] = o[2] = o[3] = 0;
            for (long lo = 0; lo < N; lo += BLOCK) {
                long n = lo + BLOCK < N ? BLOCK : N - lo;
                block_terms(xp + lo * 3 * K, dp + lo, n, K, beta[r], t, 1, o);
            }
        }
        free(t);
    }
}

/* One epoch of the authors' procedure for every pair: Adam steps on -sum_i k_i over the
 * minibatches of `order` (shared by all pairs), beta projected to >= 0 after each step.
 * `step0` steps were taken before this epoch; beta, m and v are updated in place. */
void pa_adam_epoch(const double *X, const double *delta, long P, long N, long K,
                   const long *order, long batch, double lr, double b1, double b2, double eps,
                   long step0, double *beta, double *m, double *v, int threads)
{
#pragma omp parallel num_threads(threads)
    {
        double *t = malloc(BLOCK * 3 * K * sizeof(double));
        double *rows = malloc(batch * 3 * K * sizeof(double));
        double *drow = malloc(batch * sizeof(double));
#pragma omp for schedule(dynamic, 1)
        for (long p = 0; p < P; p++) {
            const double *xp = X + p * N * 3 * K, *dp = delta + p * N;
            double bt = beta[p], mt = m[p], vt = v[p];
            long step = step0;
            for (long lo = 0; lo < N; lo += batch) {
                long n = lo + batch < N ? batch : N - lo;
                for (long r = 0; r < n; r++) { /* gather the minibatch rows */
                    long i = order[lo + r];
                    memcpy(rows + r * 3 * K, xp + i * 3 * K, 3 * K * sizeof(double));
                    drow[r] = dp[i];
                }
                double sums[4] = {0, 0, 0, 0};
                for (long r0 = 0; r0 < n; r0 += BLOCK) {
                    long nb = r0 + BLOCK < n ? BLOCK : n - r0;
                    block_terms(rows + r0 * 3 * K, drow + r0, nb, K, bt, t, 0, sums);
                }
                double grad = -sums[3];
                step++;
                mt = b1 * mt + (1 - b1) * grad;
                vt = b2 * vt + (1 - b2) * grad * grad;
                double denom = sqrt(vt) / sqrt(1 - pow(b2, (double)step)) + eps;
                bt -= (lr / (1 - pow(b1, (double)step))) * mt / denom;
                if (bt < 0) bt = 0;
            }
            beta[p] = bt;
            m[p] = mt;
            v[p] = vt;
        }
        free(t);
        free(rows);
        free(drow);
    }
}
