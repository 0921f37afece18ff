"""The special functions' C helpers (`symgrad.ops.specfun`): the C source of each function the
C and CUDA emitters paste before the kernels (`c_definitions`), and the libm functions they
call (`C_CALLS`)."""
from __future__ import annotations

import math
import re

from .specfun_coefficients import (_LGAM_A, _LGAM_B, _LGAM_C, _LS2PI, _LGAM_NEAR, _PSI_A,
                                   _PSI_ROOT, _PSI_ROOT_SERIES, _ZETA_A, _ERFINV_A, _ERFINV_B,
                                   _ERFINV_C, _ERFINV_D, _I0_A, _I0_B, _I1_A, _I1_B, _PI,
                                   _TWO_OVER_SQRT_PI, _cot_derivative_poly, _polygamma_cut,
                                   _IGAM_D, _LGAM1P)


# ----------------------------------------------------------------------------- C helpers
def _horner(coeffs, var) -> str:
    """C text of the polynomial with coefficients highest degree first, in Horner form."""
    out = repr(float(coeffs[0]))
    for c in coeffs[1:]:
        out = f"({out} * {var} + {float(c)!r})"
    return out


def _chbevl_c(coeffs, var) -> str:
    lines = [f"    b0 = {float(coeffs[0])!r}; b1 = 0.0; b2 = 0.0;"]
    for c in coeffs[1:]:
        lines.append(f"    b2 = b1; b1 = b0; b0 = {var} * b1 - b2 + {float(c)!r};")
    return "\n".join(lines)


def _c_lgamma() -> str:
    return f"""\
/* log|Gamma(x)| (Cephes lgam for x > 0, reflection for x <= 0); +inf at the poles */
SG_QUAL double symgrad_lgamma(double x)
{{
    double refl = 0.0, y, z, p, u, t;
    int neg = 0;
    if (x != x) return x;
    if (isinf(x)) return INFINITY;
    if (x <= 0.0) {{
        double n = rint(x);
        if (x == n) return INFINITY;
        refl = log({_PI!r} / fabs(sin({_PI!r} * (x - n))));
        x = 1.0 - x;
        neg = 1;
    }}
    if (x < 1e-300) {{
        y = -log(x);
    }} else if (fabs(x - 1.0) < 0.2 || fabs(x - 2.0) < 0.2) {{
        /* near the zeros at 1 and 2: the series of lgamma(1 + e) (and log1p(e) for 2 + e) */
        t = x < 1.5 ? x - 1.0 : x - 2.0;
        y = t * {_horner(_LGAM_NEAR[::-1], "t")};
        if (x >= 1.5) y += log1p(t);
    }} else if (x < 13.0) {{
        z = 1.0; p = 0.0; u = x;
        while (u >= 3.0) {{ p -= 1.0; u = x + p; z *= u; }}
        while (u < 2.0) {{ z /= u; p += 1.0; u = x + p; }}
        t = x + (p - 2.0);
        y = log(z) + t * {_horner(_LGAM_B, "t")} / {_horner(_LGAM_C, "t")};
    }} else {{
        y = (x - 0.5) * log(x) - x + {_LS2PI!r};
        if (x < 1e8) {{
            z = 1.0 / (x * x);
            y += {_horner(_LGAM_A, "z")} / x;
        }}
    }}
    return neg ? refl - y : y;
}}"""


def _c_digamma() -> str:
    return f"""\
/* digamma: recurrence up to 10, asymptotic series; reflection for x <= 0 (torch's poles) */
SG_QUAL double symgrad_digamma(double x)
{{
    double refl = 0.0, acc = 0.0, z;
    if (x != x || x == INFINITY) return x;
    z = (x - {_PSI_ROOT[0]!r}) - {_PSI_ROOT[1]!r};
    if (fabs(z) < 0.1) return {_horner(_PSI_ROOT_SERIES[::-1] + (0.0,), "z")};
    if (x <= 0.0) {{
        double n = rint(x);
        if (x == n) return x == 0.0 ? copysign(INFINITY, -x) : NAN;
        const double r = x - n;   /* cos(pi r) = sin(pi (0.5 - |r|)): 0 at half-integers */
        refl = -{_PI!r} * sin({_PI!r} * (0.5 - fabs(r))) / sin({_PI!r} * r);
        x = 1.0 - x;
    }}
    while (x < 10.0) {{ acc += 1.0 / x; x += 1.0; }}
    z = 1.0 / (x * x);
    return log(x) - 0.5 / x - z * {_horner(_PSI_A, "z")} - acc + refl;
}}"""


def _c_polygamma(n: int) -> str:
    s = float(n + 1)
    sign = 1.0 if n % 2 else -1.0
    fact = float(math.factorial(n))
    cut = _polygamma_cut(n)
    poly = _cot_derivative_poly(n)
    poly_c = _horner([float(c) for c in poly[::-1]], "c")
    divs = ", ".join(repr(d) for d in _ZETA_A)
    return f"""\
/* polygamma({n}, x) = {'-' if sign < 0 else ''}{n}! zeta({n + 1}, x): direct sum to {cut:g}, Euler-Maclaurin tail;
   reflection for x < 0 with cot's {n}-th derivative as a polynomial in cot */
SG_QUAL double symgrad_polygamma{n}(double x)
{{
    const double div[12] = {{{divs}}};
    double v, a, b, zeta, fa, k, r;
    int i, neg;
    if (x != x) return x;
    if (x == INFINITY) return 0.0;
    if (x == -INFINITY) return NAN;
    r = rint(x);
    if (x <= 0.0 && x == r) return {sign!r} * INFINITY;
    neg = x < 0.0;
    v = neg ? 1.0 - x : x;
    zeta = 0.0;
    a = v;
    while (a < {cut!r}) {{ zeta += pow(a, -{s!r}); a += 1.0; }}
    b = pow(a, -{s!r});
    zeta += pow(a, {1.0 - s!r}) / {s - 1.0!r} + 0.5 * b;   /* not a * b: b underflows first */
    fa = 1.0; k = 0.0;
    for (i = 0; i < 12; i++) {{
        fa *= {s!r} + k; b /= a;
        zeta += fa * b / div[i];
        k += 1.0; fa *= {s!r} + k; b /= a; k += 1.0;
    }}
    zeta *= {sign * fact!r};
    if (neg) {{
        const double c = sin({_PI!r} * (0.5 - fabs(x - r))) / sin({_PI!r} * (x - r));
        zeta = {-sign!r} * zeta - {_PI ** (n + 1)!r} * {poly_c};
    }}
    return zeta;
}}"""


def _c_erfinv() -> str:
    return f"""\
/* inverse error function: Pavlis' first guess, two Halley steps on erf (|y| <= 0.5) or on
   erfc(t) = 1 - |y| (exact there); +-inf at +-1, nan beyond */
SG_QUAL double symgrad_erfinv(double y)
{{
    const double a = fabs(y);
    double t, z, f, r;
    int i;
    if (!(a < 1.0)) return a == 1.0 ? copysign(INFINITY, y) : NAN;
    if (a <= 0.7) {{
        z = a * a;
        t = a * {_horner(_ERFINV_A[::-1], "z")} / ({_horner(_ERFINV_B[::-1], "z")} * z + 1.0);
    }} else {{
        z = sqrt(-log((1.0 - a) / 2.0));
        t = {_horner(_ERFINV_C[::-1], "z")} / ({_horner(_ERFINV_D[::-1], "z")} * z + 1.0);
    }}
    for (i = 0; i < 2; i++) {{
        f = a > 0.5 ? (1.0 - a) - erfc(t) : erf(t) - a;
        r = f / ({_TWO_OVER_SQRT_PI!r} * exp(-t * t));
        t = t - r / (1.0 + t * r);
    }}
    return copysign(t, y);
}}"""


def _c_bessel(order: int, scaled: bool) -> str:
    name = f"i{order}" + ("e" if scaled else "")
    near_c, far_c = (_I0_A, _I0_B) if order == 0 else (_I1_A, _I1_B)
    near_scale = "" if order == 0 else " * a"
    if scaled:
        finish = "    if (a == INFINITY) y = 0.0;"
    else:
        finish = ("    if (a == INFINITY) y = INFINITY;\n"
                  "    else { const double h = exp(a / 2.0); y = h * (h * y); }")
    odd = "\n    if (x < 0.0) y = -y;" if order == 1 else ""
    return f"""\
/* {name}(x) (Cephes Chebyshev expansions on [0, 8] and (8, inf)) */
SG_QUAL double symgrad_{name}(double x)
{{
    const double a = fabs(x);
    double b0, b1, b2, t, y;
    if (x != x) return x;
    if (a <= 8.0) {{
        t = a / 2.0 - 2.0;
{_chbevl_c(near_c, "t")}
        y = 0.5 * (b0 - b2){near_scale};
    }} else {{
        t = 32.0 / a - 2.0;
{_chbevl_c(far_c, "t")}
        y = 0.5 * (b0 - b2) / sqrt(a);
    }}
{finish}{odd}
    return y;
}}"""


def _c_igamma() -> str:
    """symgrad_igamma / symgrad_igammac (and their helpers): the NumPy helper's algorithm,
    one element at a time (needs symgrad_lgamma, defined before it)."""
    rows = []
    for k, row in enumerate(_IGAM_D):
        rows.append(f"        case {k}: ck = {_horner(row[::-1], 'eta')}; break;")
    cases = "\n".join(rows)
    return f"""\
/* log(1 + s) - s without cancellation */
SG_QUAL double symgrad_igam_log1pmx(double s)
{{
    if (fabs(s) < 0.5) {{
        double t = s / (2.0 + s), t2 = t * t, series = 0.0;
        int k;
        for (k = 17; k > 0; k--) series = series * t2 + 2.0 / (2 * k + 1);
        return -s * s / (2.0 + s) + t * t2 * series;
    }}
    return log1p(s) - s;
}}
/* x**a exp(-x) / Gamma(a): Stirling's form for a >= 10 */
SG_QUAL double symgrad_igam_fac(double a, double x)
{{
    if (a >= 10.0) {{
        double r = 1.0 / (a * a), s = (x - a) / a, e;
        double corr = (((((-691.0 / 360360.0 * r + 1.0 / 1188.0) * r - 1.0 / 1680.0) * r
                         + 1.0 / 1260.0) * r - 1.0 / 360.0) * r + 1.0 / 12.0) / a;
        e = fabs(s) < 0.5 ? a * symgrad_igam_log1pmx(s) : a * log(x / a) - (x - a);
        return sqrt(a / (2.0 * {_PI!r})) * exp(e - corr);
    }}
    return exp(a * log(x) - x - symgrad_lgamma(a));
}}
/* P(a, x) by its power series */
SG_QUAL double symgrad_igam_series(double a, double x)
{{
    double ax = symgrad_igam_fac(a, x), r = a, c = 1.0, ans = 1.0;
    int i;
    if (ax == 0.0) return 0.0;
    for (i = 0; i < 2000; i++) {{
        r += 1.0; c *= x / r; ans += c;
        if (c <= 1.1102230246251565e-16 * ans) break;
    }}
    return ans * ax / a;
}}
/* Q(a, x) by its continued fraction */
SG_QUAL double symgrad_igamc_cf(double a, double x)
{{
    double ax = symgrad_igam_fac(a, x), y, z, c = 0.0, yc, r, t, ans;
    double pk, pkm1, pkm2 = 1.0, qk, qkm1, qkm2 = x;
    int i;
    if (ax == 0.0) return 0.0;
    y = 1.0 - a; z = x + y + 1.0; pkm1 = x + 1.0; qkm1 = z * x; ans = pkm1 / qkm1;
    for (i = 0; i < 2000; i++) {{
        c += 1.0; y += 1.0; z += 2.0; yc = y * c;
        pk = pkm1 * z - pkm2 * yc; qk = qkm1 * z - qkm2 * yc;
        if (qk != 0.0) {{ r = pk / qk; t = fabs((ans - r) / r); ans = r; }} else t = 1.0;
        pkm2 = pkm1; pkm1 = pk; qkm2 = qkm1; qkm1 = qk;
        if (fabs(pk) > 4503599627370496.0) {{
            pkm2 *= 2.220446049250313e-16; pkm1 *= 2.220446049250313e-16;
            qkm2 *= 2.220446049250313e-16; qkm1 *= 2.220446049250313e-16;
        }}
        if (t <= 1.1102230246251565e-16) break;
    }}
    return ans * ax;
}}
/* lgamma(1 + a), accurate for small |a| */
SG_QUAL double symgrad_lgam1p(double a)
{{
    double e;
    if (fabs(a) <= 0.5) {{ e = a; return e * {_horner(_LGAM1P, "e")}; }}
    if (fabs(a - 1.0) < 0.5) {{ e = a - 1.0; return log(a) + e * {_horner(_LGAM1P, "e")}; }}
    return symgrad_lgamma(a + 1.0);
}}
/* Q(a, x) for small a and x, without the cancellation of 1 - P */
SG_QUAL double symgrad_igamc_series(double a, double x)
{{
    double fac = 1.0, sum = 0.0, term, logx;
    int n;
    for (n = 1; n < 2000; n++) {{
        fac *= -x / n; term = fac / (a + n); sum += term;
        if (fabs(term) <= 1.1102230246251565e-16 * fabs(sum)) break;
    }}
    logx = log(x);
    return -expm1(a * logx - symgrad_lgam1p(a)) - exp(a * logx - symgrad_lgamma(a)) * sum;
}}
/* P (upper 0) or Q (upper 1) by Temme's uniform asymptotic expansion */
SG_QUAL double symgrad_igam_asymptotic(double a, double x, int upper)
{{
    double sgn = upper ? 1.0 : -1.0, sigma = (x - a) / a, eta, res, sum = 0.0, ck = 0.0;
    double old = INFINITY, afac = 1.0, term, absterm;
    int k;
    eta = sqrt(-2.0 * symgrad_igam_log1pmx(sigma));
    if (sigma < 0.0) eta = -eta;
    res = 0.5 * erfc(sgn * eta * sqrt(a / 2.0));
    for (k = 0; k < {len(_IGAM_D)}; k++) {{
        switch (k) {{
{cases}
        }}
        term = ck * afac; absterm = fabs(term);
        if (absterm > old) break;
        sum += term;
        if (absterm < 1.1102230246251565e-16 * fabs(sum)) break;
        old = absterm; afac /= a;
    }}
    return res + sgn * exp(-0.5 * a * eta * eta) * sum / sqrt(2.0 * {_PI!r} * a);
}}
/* P(a, x) (upper 0) or Q(a, x) (upper 1): Cephes igam / igamc with torch's edge values */
SG_QUAL double symgrad_igamma_pq(double a, double x, int upper)
{{
    double p = upper ? 0.0 : 1.0, q = upper ? 1.0 : 0.0, ratio, r;
    if (!(a >= 0.0) || !(x >= 0.0)) return NAN;
    if (a == 0.0) return x > 0.0 ? p : NAN;
    if (x == 0.0) return q;
    if (isinf(a)) return isinf(x) ? NAN : q;
    if (isinf(x)) return p;
    ratio = fabs(x - a) / a;
    if ((a > 20.0 && a < 200.0 && ratio < 0.3) || (a > 200.0 && ratio < 4.5 / sqrt(a)))
        return symgrad_igam_asymptotic(a, x, upper);
    if (!upper && !(x > 1.0 && x > a)) return symgrad_igam_series(a, x);
    /* Q's choice of method (for P: x > 1, x > a, P = 1 - Q) */
    if (x > 1.1) {{
        r = x < a ? 1.0 - symgrad_igam_series(a, x) : symgrad_igamc_cf(a, x);
    }} else if (x <= 0.5) {{
        r = -0.4 / log(x) < a ? 1.0 - symgrad_igam_series(a, x) : symgrad_igamc_series(a, x);
    }} else {{
        r = x * 1.1 < a ? 1.0 - symgrad_igam_series(a, x) : symgrad_igamc_series(a, x);
    }}
    return upper ? r : 1.0 - r;
}}
SG_QUAL double symgrad_igamma(double a, double x) {{ return symgrad_igamma_pq(a, x, 0); }}
SG_QUAL double symgrad_igammac(double a, double x) {{ return symgrad_igamma_pq(a, x, 1); }}"""


def _c_source(name: str) -> str:
    """The double-precision C definition of helper `name` (symgrad_<name>)."""
    if name == "lgamma":
        return _c_lgamma()
    if name == "digamma":
        return _c_digamma()
    if name == "erfinv":
        return _c_erfinv()
    if name == "igamma":
        return _c_igamma()
    m = re.fullmatch(r"polygamma(\d+)", name)
    if m:
        return _c_polygamma(int(m.group(1)))
    m = re.fullmatch(r"i([01])(e?)", name)
    if m:
        return _c_bessel(int(m.group(1)), bool(m.group(2)))
    raise KeyError(name)


_C_CALL = re.compile(
    r"(?<![\w.])symgrad_(lgamma|digamma|erfinv|polygamma\d+|i[01]e?|igammac?)(f?)\(")
# helpers a helper calls (defined before it); igamma's source defines igamma and igammac
_C_DEPENDS = {"igamma": ("lgamma",)}


def c_definitions(code: str, qualifier: str) -> str:
    """C definitions of the special-function helpers that `code` calls (symgrad_lgamma,
    symgrad_lgammaf, symgrad_polygamma2, ...), each declared with `qualifier` (the C target's
    SYMGRAD_INLINE, CUDA's SG_DEVICE). The float versions evaluate the double ones and round
    once, as the NumPy target does. Empty when `code` calls none."""
    calls = [(m.group(1), m.group(2)) for m in _C_CALL.finditer(code)]
    sources = {"igammac": "igamma"}          # the one C source that defines both
    wanted = []
    for name in sorted({sources.get(name, name) for name, _ in calls}):
        for dep in _C_DEPENDS.get(name, ()) + (name,):     # dependencies first
            if dep not in wanted:
                wanted.append(dep)
    floats = sorted({name for name, f in calls if f})
    parts = []
    for source in wanted:     # each source, then the float versions of what it defines
        parts.append(_c_source(source).replace("SG_QUAL", qualifier))
        for name in floats:
            if sources.get(name, name) != source:
                continue
            if source == "igamma":
                parts.append(f"{qualifier} float symgrad_{name}f(float a, float x) "
                             f"{{ return (float)symgrad_{name}((double)a, (double)x); }}")
            else:
                parts.append(f"{qualifier} float symgrad_{name}f(float x) "
                             f"{{ return (float)symgrad_{name}((double)x); }}")
    return "\n".join(parts)


# libm functions the helpers call (the C target declares their vector variants)
C_CALLS = " exp( log( log1p( sin( pow( sqrt( erf( erfc( "
