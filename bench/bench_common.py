"""Helpers the benchmarks share (onnx_vs_ort.py, onnx_quant.py, ctc_vs_torch.py, vision_vs_torchvision.py):
the CPU's name and the timers."""
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
    return timed_cpu(fn, steps)[:3]


def timed_cpu(fn, steps):
    """timed(fn, steps) and the process's CPU time per timed call in ms (every thread: at one
    thread on a loaded machine the steadier measure, since waiting for a core is not counted)."""
    fn()  # warm-up
    ts = []
    c0 = time.process_time()
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    cpu = (time.process_time() - c0) * 1e3 / max(steps, 1)
    ts.sort()
    return ts[len(ts) // 2], ts[len(ts) // 10], ts[min(len(ts) - 1, (len(ts) * 9) // 10)], cpu


def timed_medians(fn, steps):
    """Median wall ms and median process CPU ms over `steps` timed calls of fn after a warm-up (each
    call timed both ways: the CPU median is the steady measure on a loaded machine)."""
    import statistics

    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return statistics.median(wall), statistics.median(cpu)
