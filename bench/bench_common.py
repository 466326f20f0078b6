"""Helpers the ONNX benchmarks share (onnx_vs_ort.py, onnx_quant.py): the CPU's name and a timer."""
import platform
import time


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def timed(fn, steps):
    """Median, 10th and 90th percentile of `steps` timed calls of fn after a warm-up, in ms."""
    fn()  # warm-up
    ts = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return ts[len(ts) // 2], ts[len(ts) // 10], ts[min(len(ts) - 1, (len(ts) * 9) // 10)]
