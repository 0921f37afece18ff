"""Print the coefficients d[k][n] of Temme's uniform asymptotic expansion of the regularized
incomplete gamma functions (DLMF 8.12.8-8.12.11), in exact rational arithmetic:

    Q(a, x) = erfc(eta sqrt(a/2)) / 2 + exp(-a eta**2 / 2) / sqrt(2 pi a) sum_k c_k(eta) a**-k
    c_k(eta) = sum_n d[k][n] eta**n

with lambda = x / a, mu = lambda - 1, eta**2 / 2 = mu - log(1 + mu) (eta the sign of mu),
c_0 = 1/mu - 1/eta and c_k = c_{k-1}'(eta) / eta + (-1)**k g_k / mu (g_k: the Stirling
series coefficients of Gamma*, DLMF 5.11.3). symgrad/ops/specfun.py holds the table this
prints (`python tools/temme_coefficients.py K N`, K rows of N coefficients).
"""
import sys
from fractions import Fraction as F
from math import comb


def bernoulli(n):
    b = [F(1)]
    for m in range(1, n + 1):
        b.append(-sum(comb(m + 1, j) * b[j] for j in range(m)) / (m + 1))
    return b


def mul(a, b, order):
    out = [F(0)] * order
    for i, x in enumerate(a[:order]):
        if x:
            for j, y in enumerate(b[:order - i]):
                out[i + j] += x * y
    return out


def reciprocal(a, order):          # 1 / a, a[0] != 0
    out = [F(0)] * order
    out[0] = 1 / a[0]
    for n in range(1, order):
        out[n] = -sum(a[k] * out[n - k] for k in range(1, min(n, len(a) - 1) + 1)) / a[0]
    return out


def exp_series(a, order):          # exp(a), a[0] == 0
    out = [F(0)] * order
    out[0] = F(1)
    for n in range(1, order):      # out' = a' out
        out[n] = sum(k * a[k] * out[n - k] for k in range(1, min(n, len(a) - 1) + 1)) / n
    return out


def gstar(k_max):
    """g_0..g_k_max: Gamma*(z) = sum g_k z**-k (DLMF 5.11.3), from ln Gamma*'s Stirling series."""
    b = bernoulli(2 * k_max + 2)
    ln = [F(0)] * (k_max + 1)
    for m in range(1, k_max + 2):
        if 2 * m - 1 <= k_max:
            ln[2 * m - 1] = b[2 * m] / (2 * m * (2 * m - 1))
    return exp_series(ln, k_max + 1)


def mu_of_eta(order):
    """mu(eta) = eta + ... with mu - log(1 + mu) = eta**2 / 2, coefficients of eta**0..order-1."""
    mu = [F(0), F(1)] + [F(0)] * (order - 2)
    for m in range(2, order):
        # the eta**(m+1) coefficient of mu - log(1 + mu) = sum_j>=2 (-1)**j mu**j / j
        power = mul(mu, mu, m + 2)
        total = F(0)
        j = 2
        while j <= m + 1:
            total += (-1) ** j * power[m + 1] / j
            power = mul(power, mu, m + 2)
            j += 1
        mu[m] = -total          # mu[m] enters the eta**(m+1) coefficient as mu[1] * mu[m]
    return mu


def table(k_rows, n_cols):
    order = n_cols + 2 * k_rows + 3
    mu = mu_of_eta(order + 1)
    beta = mu[1:]               # mu = eta * beta(eta), beta[0] = 1
    inv = reciprocal(beta, order)   # eta / mu
    # c_0 = (eta/mu - 1) / eta
    c = [(inv[n + 1]) for n in range(order - 1)]
    rows = [c]
    g = gstar(k_rows)
    for k in range(1, k_rows):
        prev = rows[-1]
        # c_{k-1}'(eta) / eta: coefficient of eta**(n-2) is n d_{k-1,n}; the eta**-1 term
        # (n = 1) cancels against (-1)**k g_k / mu's
        assert prev[1] + (-1) ** k * g[k] == 0, k
        nxt = []
        for n in range(len(prev) - 2):
            nxt.append((n + 2) * prev[n + 2] + (-1) ** k * g[k] * inv[n + 1])
        rows.append(nxt)
    return [[r[n] for n in range(n_cols)] for r in rows]


if __name__ == "__main__":
    K, N = (int(a) for a in sys.argv[1:3]) if len(sys.argv) > 2 else (10, 25)
    for row in table(K, N):
        print("(" + ", ".join(repr(float(v)) for v in row) + "),")
