"""Solves, factorisations and matrix pipelines written with loops, as in a textbook."""

import numpy as np
from sci_registry import LOOSE, case, grid, spd


def _tridiagonal(rng, n):
    a = rng.random(n) * 0.5
    c = rng.random(n) * 0.5
    b = 2.0 + rng.random(n)  # diagonally dominant: the Thomas algorithm is stable
    return a, b, c, rng.standard_normal(n)


@case("solve", lambda r: _tridiagonal(r, 6), lambda r: _tridiagonal(r, 1000),
      quick=lambda r: _tridiagonal(r, 100), tol=LOOSE)
def thomas(a, b, c, d):
    n = len(d)
    cp = np.zeros(n)
    dp = np.zeros(n)
    cp[0] = c[0] / b[0]
    dp[0] = d[0] / b[0]
    for i in range(1, n):
        m = b[i] - a[i] * cp[i - 1]
        cp[i] = c[i] / m
        dp[i] = (d[i] - a[i] * dp[i - 1]) / m
    x = np.zeros(n)
    x[-1] = dp[-1]
    for i in range(n - 2, -1, -1):
        x[i] = dp[i] - cp[i] * x[i + 1]
    return x


def _lower(rng, n):
    L = np.tril(rng.standard_normal((n, n))) + n * np.eye(n)
    return L, rng.standard_normal(n)


@case("solve", lambda r: _lower(r, 6), lambda r: _lower(r, 500), quick=lambda r: _lower(r, 50),
      tol=LOOSE)
def forward_substitution(L, b):
    n = L.shape[0]
    x = np.zeros_like(b)
    for i in range(n):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return x


@case("solve", lambda r: _lower(r, 6), lambda r: _lower(r, 500), quick=lambda r: _lower(r, 50),
      tol=LOOSE)
def back_substitution(L, b):
    U = L.T
    n = U.shape[0]
    x = np.empty(n)
    for i in range(n - 1, -1, -1):
        x[i] = (b[i] - np.dot(U[i, i + 1:], x[i + 1:])) / U[i, i]
    return x


@case("factor", lambda r: (spd(r, 5),), lambda r: (spd(r, 300),), quick=lambda r: (spd(r, 30),),
      tol=LOOSE)
def cholesky_columns(A):
    n = A.shape[0]
    L = np.zeros_like(A)
    for j in range(n):
        L[j, j] = np.sqrt(A[j, j] - np.sum(L[j, :j] ** 2))
        L[j + 1:, j] = (A[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    return L


@case("factor", lambda r: (grid(r, 8, 4),), lambda r: (grid(r, 800, 200),),
      quick=lambda r: (grid(r, 800, 20),), tol=LOOSE)
def modified_gram_schmidt(A):
    m, n = A.shape
    Q = A.copy()
    R = np.zeros((n, n))
    for k in range(n):
        R[k, k] = np.sqrt(Q[:, k] @ Q[:, k])
        Q[:, k] = Q[:, k] / R[k, k]
        for j in range(k + 1, n):
            R[k, j] = Q[:, k] @ Q[:, j]
            Q[:, j] = Q[:, j] - R[k, j] * Q[:, k]
    return Q, R


@case("factor", lambda r: (spd(r, 8), 4), lambda r: (spd(r, 500), 200),
      quick=lambda r: (spd(r, 500), 20), tol=LOOSE)
def power_iteration(A, iters):
    b = np.ones(A.shape[0])
    for _ in range(iters):
        b = A @ b
        b = b / np.linalg.norm(b)
    eig = b @ (A @ b)
    return eig, b


@case("matrix", lambda r: (grid(r, 16, 16), grid(r, 16), grid(r, 16)),
      lambda r: (grid(r, 1500, 1500), grid(r, 1500), grid(r, 1500)), tol=LOOSE)
def matvec_pipeline(A, x, y):
    r = A @ x
    s = A.T @ y
    return np.tanh(r / len(x)) + 0.5 * s


@case("matrix", lambda r: (1.5, grid(r, 16, 12), grid(r, 12, 10), 0.5, grid(r, 16, 10)),
      lambda r: (1.5, grid(r, 1000, 1000), grid(r, 1000, 1000), 0.5, grid(r, 1000, 1000)),
      tol=LOOSE)
def gemm_update(alpha, A, B, beta, C):
    return alpha * A @ B + beta * C


@case("matrix", lambda r: (grid(r, 20, 5), grid(r, 20), 0.1),
      lambda r: (grid(r, 5000, 200), grid(r, 5000), 0.1), tol=LOOSE)
def ridge_normal_equations(X, y, lam):
    n_features = X.shape[1]
    XtX = X.T @ X + lam * np.eye(n_features)
    Xty = X.T @ y
    w = np.linalg.solve(XtX, Xty)
    resid = y - X @ w
    return w, resid @ resid / len(y)


@case("matrix", lambda r: (grid(r, 10, 4),), lambda r: (grid(r, 2000, 120),),
      quick=lambda r: (grid(r, 2000, 12),), tol=LOOSE)
def covariance_fill(X):
    m, n = X.shape
    Xc = X - X.mean(axis=0)
    C = np.zeros((n, n))
    for i in range(n):
        C[i, i:] = Xc[:, i] @ Xc[:, i:] / (m - 1)
        C[i:, i] = C[i, i:]
    return C
