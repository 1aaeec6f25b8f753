"""Is the forward's access pattern (a program per (b, h) streaming (64, 64) tiles of x and y
over T: 128-byte pieces of rows 4 KB apart) slower than a contiguous copy on the H200?

    python benchmarks/probe/copy_pattern.py

Prints GB/s (read + write) of torch's copy and of Triton copy kernels with that pattern: one
program per (b, h) over all of T (also reading each chunk's B and C beside x, s36), per
(b, h, span of T), and per (b, chunk) over all heads.
"""
import torch
import triton
import triton.language as tl
from triton.testing import do_bench


@triton.jit
def copy_bh(x_ptr, y_ptr, b_ptr, c_ptr, T, H, SPAN, P: tl.constexpr, Q: tl.constexpr,
            N: tl.constexpr = 0):
    """A program per (b, h, span of SPAN rows): (Q, P) tiles of x (b, T, H, P) to y. With
    N > 0 each tile also reads the (Q, N) tiles of B and C (b, T, N) that every head of a b
    shares (from L2, as the forward reads them) and y = x + the row sums of B * C (so that
    the loads stay)."""
    pid = tl.program_id(0)
    nsp = tl.cdiv(T, SPAN)
    sp = pid % nsp
    bh = pid // nsp
    b = bh // H
    h = bh % H
    r = tl.arange(0, Q)[:, None]
    c = tl.arange(0, P)[None, :]
    base = (b * T).to(tl.int64) * H * P + h * P
    for t0 in tl.range(sp * SPAN, sp * SPAN + SPAN, Q, num_stages=3):
        off = base + (t0 + r).to(tl.int64) * H * P + c
        x = tl.load(x_ptr + off)
        if N > 0:
            boff = (b * T + t0 + r).to(tl.int64) * N + tl.arange(0, N)[None, :]
            bc = tl.sum(tl.load(b_ptr + boff).to(tl.float32) * tl.load(c_ptr + boff), axis=1)
            x = (x + bc[:, None]).to(tl.bfloat16)
        tl.store(y_ptr + off, x)


@triton.jit
def copy_bt(x_ptr, y_ptr, T, H, P: tl.constexpr, Q: tl.constexpr, HB: tl.constexpr):
    """A program per (b, chunk): the chunk's rows of all heads, HB heads a step."""
    pid = tl.program_id(0)
    r = tl.arange(0, Q)[:, None]
    c = tl.arange(0, HB * P)[None, :]
    base = pid.to(tl.int64) * Q * H * P
    for h0 in tl.range(0, H, HB, num_stages=3):
        off = base + r * H * P + h0 * P + c
        tl.store(y_ptr + off, tl.load(x_ptr + off))


def main():
    b, T, h, p = 8, 16384, 32, 64
    x = torch.randn(b, T, h, p, device="cuda").to(torch.bfloat16)
    y = torch.empty_like(x)
    nbytes = 2 * x.numel() * 2

    def rate(fn):
        ms = do_bench(fn, warmup=10, rep=50, return_mode="median")
        return ms, nbytes / ms / 1e6

    print("torch copy: %.3f ms %.0f GB/s" % rate(lambda: y.copy_(x)))
    for span in (T, T // 4, T // 16):
        for w in (4, 8):
            g = b * h * (T // span)
            fn = lambda: copy_bh[(g,)](x, y, x, x, T, h, span, P=p, Q=64,  # noqa: E731
                                       num_warps=w)
            fn()
            assert torch.equal(x, y)
            y.zero_()
            print(f"per (b, h), spans of {span}, {w} warps: %.3f ms %.0f GB/s" % rate(fn))
    for n in (64, 128):
        Bm = torch.randn(b, T, n, device="cuda").to(torch.bfloat16)
        Cm = torch.randn(b, T, n, device="cuda").to(torch.bfloat16)
        want = (x.float() + (Bm.float() * Cm.float()).sum(-1)[:, :, None, None]).bfloat16()
        for w in (4, 8):
            fn = lambda: copy_bh[(b * h,)](x, y, Bm, Cm, T, h, T, P=p, Q=64, N=n,  # noqa: E731
                                           num_warps=w)
            fn()
            torch.testing.assert_close(y, want)
            y.zero_()
            print(f"per (b, h), B and C of n = {n} read too, {w} warps: %.3f ms %.0f GB/s"
                  " (x and y only)" % rate(fn))
    for hb in (1, 4):
        fn = lambda: copy_bt[(b * T // 64,)](x, y, T, h, P=p, Q=64, HB=hb, num_warps=4)  # noqa
        fn()
        assert torch.equal(x, y)
        y.zero_()
        print(f"per (b, chunk), {hb} heads a step: %.3f ms %.0f GB/s" % rate(fn))


if __name__ == "__main__":
    main()
