/* Giles' single-precision erfinv ("Approximating the erfinv function", GPU Computing Gems, 2011;
 * relative error ~4e-7): erfinv(x) = x p(w) with w = -log((1 - x)(1 + x)), p the central
 * polynomial where w < 5 and the tail one elsewhere.  The caller computes w with its own log
 * (the corruption kernels with rng.py's float operations, sov.c with libm's vectorised logf) and
 * picks the branch its way (a jump, or both evaluated and selected without one).
 * Shared by datasets/corruptions/native.c and metrics/avgcase/sov.c (pabench.core.native puts
 * this directory on the include path); rng.py's normal_from_uniform is the numpy twin. */
#ifndef PABENCH_GILES_ERFINV_H
#define PABENCH_GILES_ERFINV_H

#include <math.h>

static inline float giles_erfinv_centre(float w) {
    float c = w - 2.5f;
    float p = 2.81022636e-08f;
    p = 3.43273939e-07f + p * c;
    p = -3.5233877e-06f + p * c;
    p = -4.39150654e-06f + p * c;
    p = 0.00021858087f + p * c;
    p = -0.00125372503f + p * c;
    p = -0.00417768164f + p * c;
    p = 0.246640727f + p * c;
    p = 1.50140941f + p * c;
    return p;
}

static inline float giles_erfinv_tail(float w) {
    float t = sqrtf(w) - 3.0f;
    float q = -0.000200214257f;
    q = 0.000100950558f + q * t;
    q = 0.00134934322f + q * t;
    q = -0.00367342844f + q * t;
    q = 0.00573950773f + q * t;
    q = -0.0076224613f + q * t;
    q = 0.00943887047f + q * t;
    q = 1.00167406f + q * t;
    q = 2.83297682f + q * t;
    return q;
}

#endif
