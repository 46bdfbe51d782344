"""Time-stepping stencils: heat, wave, Jacobi, advection, as in a numerics course."""

import numpy as np
from sci_registry import LOOSE, case, grid


@case("stencil", lambda r: (grid(r, 16), 0.25, 5), lambda r: (grid(r, 100_000), 0.25, 500),
      quick=lambda r: (grid(r, 100_000), 0.25, 50))
def heat_1d(u, alpha, nt):
    for t in range(nt):
        u[1:-1] = u[1:-1] + alpha * (u[2:] - 2 * u[1:-1] + u[:-2])
    return u


@case("stencil", lambda r: (grid(r, 8, 8), 0.2, 4), lambda r: (grid(r, 512, 512), 0.2, 100),
      quick=lambda r: (grid(r, 512, 512), 0.2, 10))
def heat_2d(u, alpha, nt):
    for n in range(nt):
        un = u.copy()
        u[1:-1, 1:-1] = un[1:-1, 1:-1] + alpha * (
            un[2:, 1:-1] + un[:-2, 1:-1] + un[1:-1, 2:] + un[1:-1, :-2] - 4 * un[1:-1, 1:-1])
        u[0, :] = 0.0
        u[-1, :] = 0.0
    return u


@case("stencil", lambda r: (grid(r, 6, 6, 6, dtype=np.float32), 0.1, 3),
      lambda r: (grid(r, 96, 96, 96, dtype=np.float32), 0.1, 100),
      quick=lambda r: (grid(r, 96, 96, 96, dtype=np.float32), 0.1, 10))
def heat_3d(u0, k, steps):
    u = u0.copy()
    for _ in range(steps):
        lap = (u[2:, 1:-1, 1:-1] + u[:-2, 1:-1, 1:-1] + u[1:-1, 2:, 1:-1]
               + u[1:-1, :-2, 1:-1] + u[1:-1, 1:-1, 2:] + u[1:-1, 1:-1, :-2]
               - 6.0 * u[1:-1, 1:-1, 1:-1])
        u[1:-1, 1:-1, 1:-1] += k * lap
    return u


@case("stencil", lambda r: (grid(r, 20), 0.5, 5), lambda r: (grid(r, 200_000), 0.5, 500),
      quick=lambda r: (grid(r, 200_000), 0.5, 50))
def wave_1d(u0, courant, nsteps):
    c2 = courant ** 2
    u_prev = u0.copy()
    u = u0.copy()
    for n in range(nsteps):
        u_next = np.empty_like(u)
        u_next[1:-1] = 2 * u[1:-1] - u_prev[1:-1] + c2 * (u[2:] - 2 * u[1:-1] + u[:-2])
        u_next[0] = 0.0
        u_next[-1] = 0.0
        u_prev, u = u, u_next
    return u


@case("stencil", lambda r: (grid(r, 8, 8), 0.3, 4), lambda r: (grid(r, 400, 400), 0.3, 200),
      quick=lambda r: (grid(r, 400, 400), 0.3, 20))
def wave_2d(u0, c, nt):
    u_old = np.zeros_like(u0)
    u = u0.copy()
    for it in range(nt):
        lap = np.zeros_like(u)
        lap[1:-1, 1:-1] = (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2]
                           - 4.0 * u[1:-1, 1:-1])
        u_new = 2.0 * u - u_old + c * c * lap
        u_old = u
        u = u_new
    energy = (u ** 2).sum()
    return u, energy


@case("stencil", lambda r: (grid(r, 8, 8), 5), lambda r: (grid(r, 256, 256), 300),
      quick=lambda r: (grid(r, 256, 256), 30))
def jacobi_poisson(f, iters):
    n = f.shape[0]
    h2 = (1.0 / (n - 1)) ** 2
    p = np.zeros_like(f)
    for k in range(iters):
        pn = p.copy()
        p[1:-1, 1:-1] = 0.25 * (pn[1:-1, 2:] + pn[1:-1, :-2] + pn[2:, 1:-1] + pn[:-2, 1:-1]
                                - h2 * f[1:-1, 1:-1])
    return p


@case("stencil", lambda r: (grid(r, 7, 7), 1.5, 2), lambda r: (grid(r, 257, 257), 1.5, 100),
      quick=lambda r: (grid(r, 65, 65), 1.5, 2))
def red_black_sor(u, omega, sweeps):
    # Gauss-Seidel with over-relaxation, red and black points updated by strided slices.
    for s in range(sweeps):
        for start in (1, 2):
            for i in range(1, u.shape[0] - 1):
                j0 = start if i % 2 else 3 - start
                gs = 0.25 * (u[i - 1, j0:-1:2] + u[i + 1, j0:-1:2]
                             + u[i, j0 - 1:-2:2] + u[i, j0 + 1::2])
                u[i, j0:-1:2] = (1 - omega) * u[i, j0:-1:2] + omega * gs
    return u


@case("stencil", lambda r: (grid(r, 24) - 0.5, 0.4, 5),
      lambda r: (grid(r, 100_000) - 0.5, 0.4, 300),
      quick=lambda r: (grid(r, 100_000) - 0.5, 0.4, 30), tol=LOOSE)
def upwind_advection(u, cfl, nt):
    for _ in range(nt):
        backward = u[1:-1] - u[:-2]
        forward = u[2:] - u[1:-1]
        u[1:-1] = u[1:-1] - cfl * np.where(u[1:-1] > 0, u[1:-1] * backward, u[1:-1] * forward)
    return u


@case("stencil", lambda r: (grid(r, 8, 8), 1e-3, 50), lambda r: (grid(r, 128, 128), 1e-4, 2000),
      quick=lambda r: (grid(r, 128, 128), 1e-4, 200), tol=LOOSE)
def jacobi_until_converged(b, tol, max_iter):
    # A data-dependent `while`: the convergence test reads the array each sweep.
    x = np.zeros_like(b)
    err = 1.0
    it = 0
    while err > tol and it < max_iter:
        x_new = x.copy()
        x_new[1:-1, 1:-1] = 0.25 * (x[2:, 1:-1] + x[:-2, 1:-1] + x[1:-1, 2:] + x[1:-1, :-2]
                                    + b[1:-1, 1:-1])
        err = np.abs(x_new - x).max()
        x = x_new
        it += 1
    return x, it
