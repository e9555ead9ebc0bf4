"""bench/peers.py — the Python peers of `make bench` (NumPy, PyTorch and
TensorFlow 1.x graph mode through tensorflow.compat.v1), one process per
framework (PyTorch and TensorFlow abort when loaded together) that stays alive for the whole bench, so bench/harness.lua can time
them interleaved with moonflow.

Protocol: one command per line on stdin, one reply per line on stdout
("ok [value]" or "err <what went wrong>"); anything else a library prints
goes to stderr.
  version <module>                 -> ok <module's version>
  setup <id> <workload> <args...>  -> ok          (args are Python literals)
  run <id> <calls>                 -> ok <seconds for that many calls>
  figure <id> <key>                -> ok <another figure the workload measured>
  quit
A workload builds its data and graph once and returns the function one call
of which is the unit of work timed, or (function, prepare) where prepare runs
before each timed batch (PyTorch's thread count is per process, so each
workload sets its own), or (function, prepare, finish) where finish runs at
the end of each batch, timed (a GPU workload waits there for the work its
calls queued), or a Timed.
"""
import ast
import atexit
import gc
import importlib
import os
import sys
import time

WORKLOADS = {}


def workload(fn):
    WORKLOADS[fn.__name__] = fn
    return fn


class Timed:
    """A workload whose calls time themselves: call() does untimed work first
    (freeing the previous call's graph, collecting garbage) and returns the
    seconds of its timed part. figures holds what else it measured (bytes
    per op), read with `figure`."""

    def __init__(self, call):
        self.call = call
        self.figures = {}


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def held_arrays(np, mib):
    """Other arrays the script keeps alive (issue 13: 100 MB of them made
    fresh 40 MB buffers come from mmap and page-fault on every run)."""
    return [np.ones(1 << 18, dtype=np.float32) for _ in range(mib)]


def chain_in_place(m, chain, x, y):
    """The fusion bench's elementwise chains into y, one pass per op, with
    NumPy or PyTorch (m): "axpb" is x * 2 + 1, "tanh" tanh(x * 0.5 + 0.25) * 3."""
    if chain == "axpb":
        m.multiply(x, 2, out=y)
        m.add(y, 1, out=y)
    elif chain == "tanh":
        m.multiply(x, 0.5, out=y)
        m.add(y, 0.25, out=y)
        m.tanh(y, out=y)
        m.multiply(y, 3, out=y)
    else:
        raise ValueError("no chain named " + chain)


@workload
def numpy_axpb(n, in_place, hold_mib):
    import numpy as np
    x = (np.arange(n) % 1000).astype(np.float32)
    held = held_arrays(np, hold_mib)
    if not in_place:
        return lambda: (held, x * 2 + 1)
    y = np.empty_like(x)
    return lambda: chain_in_place(np, "axpb", x, y)


def chain_input(np, n):
    return (np.arange(n) % 1000 * 0.001).astype(np.float32)


@workload
def numpy_chain(chain, n):
    import numpy as np
    x = chain_input(np, n)
    y = np.empty_like(x)
    return lambda: chain_in_place(np, chain, x, y)


@workload
def numpy_matmul(n):
    import numpy as np
    a = (np.arange(n * n) % 7 * 0.25).astype(np.float32).reshape(n, n)
    b = (np.arange(n * n) % 5 * 0.5).astype(np.float32).reshape(n, n)
    c = np.empty_like(a)
    return lambda: np.matmul(a, b, out=c)


def torch_threads(threads):
    import torch
    return lambda: torch.set_num_threads(threads)


@workload
def torch_add_scalar():
    import torch
    x = torch.tensor(3.0)
    return (lambda: x + 1), torch_threads(1)


@workload
def torch_scalar_loop(n):
    """One call runs n iterations of the loop moonflow's while_loop row runs."""
    import torch

    def call():
        i, v = torch.tensor(0), torch.tensor(0.0)
        while i < n:
            i, v = i + 1, v + 1
    return call, torch_threads(1)


@workload
def torch_chain(chain, n, threads):
    import numpy as np
    import torch
    x = torch.from_numpy(chain_input(np, n))
    y = torch.empty_like(x)
    return (lambda: chain_in_place(torch, chain, x, y)), torch_threads(threads)


def torch_mlp_step(torch, sizes, adam, lr, batch, device):
    """A training step of an MLP on device ("cpu", "cuda") whose batch, made
    in host memory, is copied to the device each step (a no-op on the CPU),
    as a TF1 feed is."""
    torch.manual_seed(0)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).to(device)
    opt = (torch.optim.Adam if adam else torch.optim.SGD)(model.parameters(), lr)
    x = torch.rand(batch, sizes[0])
    y = torch.randint(0, sizes[-1], (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(model(x.to(device)), y.to(device)).backward()
        opt.step()
    return step


@workload
def torch_mlp(sizes, adam, lr, batch, threads):
    import torch
    return torch_mlp_step(torch, sizes, adam, lr, batch, "cpu"), torch_threads(threads)


def torch_cuda():
    """PyTorch, when it sees a CUDA device."""
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("PyTorch %s sees no CUDA device" % torch.__version__)
    return torch


@workload
def torch_cuda_mlp(sizes, adam, lr, batch):
    torch = torch_cuda()
    return torch_mlp_step(torch, sizes, adam, lr, batch, "cuda"), None, torch.cuda.synchronize


@workload
def torch_cuda_mm(n):
    """torch.mm of two n x n float32 matrices on the GPU into a third (PyTorch's
    defaults: no TF32), the bench's data: (i % 7) * 0.25 and (i % 5) * 0.5."""
    torch = torch_cuda()
    a = (torch.arange(n * n, device="cuda") % 7 * 0.25).float().reshape(n, n)
    b = (torch.arange(n * n, device="cuda") % 5 * 0.5).float().reshape(n, n)
    c = torch.empty_like(a)
    return (lambda: torch.mm(a, b, out=c)), None, torch.cuda.synchronize


@workload
def torch_cuda_axpb(n):
    """x * 2 + 1 over n float32 on the GPU, x[i] = i % 1000, a fresh result
    each call (from PyTorch's caching allocator)."""
    torch = torch_cuda()
    x = (torch.arange(n, device="cuda") % 1000).float()
    return (lambda: x * 2 + 1), None, torch.cuda.synchronize


@workload
def numpy_sum(n):
    import numpy as np
    x = (np.arange(n) % 1000 * 0.001).astype(np.float32)
    return lambda: x.sum()


@workload
def numpy_softmax(rows, cols):
    """softmax along the last axis, shifted by the row maximum as moonflow's."""
    import numpy as np
    x = (np.arange(rows * cols) % 1000 * 0.01).astype(np.float32).reshape(rows, cols)

    def call():
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return call


@workload
def torch_conv2d(n, h, w, c, oc, threads):
    """A 3x3 SAME convolution of an NHWC-sized input (PyTorch's layout is NCHW)."""
    import torch
    x = torch.rand(n, c, h, w)
    f = torch.rand(oc, c, 3, 3)

    def call():
        with torch.no_grad():
            torch.nn.functional.conv2d(x, f, padding=1)
    return call, torch_threads(threads)


@workload
def torch_depthwise(n, h, w, c, threads):
    """A 3x3 SAME depthwise convolution (groups = channels) of an NHWC-sized input."""
    import torch
    x = torch.rand(n, c, h, w)
    f = torch.rand(c, 1, 3, 3)

    def call():
        with torch.no_grad():
            torch.nn.functional.conv2d(x, f, padding=1, groups=c)
    return call, torch_threads(threads)


def tf1():
    """TensorFlow 1.x graph mode: sessions, placeholders, no eager."""
    import os
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()
    return tf


def tf1_scalar_graph():
    """y = x + 1 with a scalar placeholder x, and a session on it."""
    tf = tf1()
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [])
        y = x + 1
    return tf.Session(graph=g), x, y


@workload
def tf1_run_scalar():
    sess, x, y = tf1_scalar_graph()
    feeds = {x: 2.0}
    return lambda: sess.run(y, feeds)


@workload
def tf1_callable_scalar():
    sess, x, y = tf1_scalar_graph()
    run = sess.make_callable(y, feed_list=[x])
    return lambda: run(2.0)


@workload
def tf1_assign():
    tf = tf1()
    g = tf.Graph()
    with g.as_default():
        x = tf.Variable(0, name="x")
        increment_x = tf.assign(x, x + 1)
        init = tf.global_variables_initializer()
    sess = tf.Session(graph=g)
    sess.run(init)
    return lambda: sess.run(increment_x)


@workload
def tf1_while(n):
    """One call runs n iterations of a scalar loop, body i + 1, v + 1."""
    tf = tf1()
    g = tf.Graph()
    with g.as_default():
        limit = tf.placeholder(tf.int32, [])
        _, v = tf.while_loop(lambda i, v: i < limit, lambda i, v: (i + 1, v + 1),
                             [tf.constant(0), tf.constant(0.0)])
    run = tf.Session(graph=g).make_callable(v, feed_list=[limit])
    return lambda: run(n)


@workload
def tf1_axpb(n, hold_mib):
    import numpy as np
    tf = tf1()
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [n])
        y = x * 2 + 1
    run = tf.Session(graph=g).make_callable(y, feed_list=[x])
    xs = (np.arange(n) % 1000).astype(np.float32)
    held = held_arrays(np, hold_mib)
    return lambda: (held, run(xs))


@workload
def tf1_depthwise(n, h, w, c):
    """tf.nn.depthwise_conv2d_native, 3x3 SAME, NHWC (TensorFlow's CPU layout)."""
    import numpy as np
    tf = tf1()
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [n, h, w, c])
        f = tf.constant(np.random.rand(3, 3, c, 1).astype(np.float32))
        y = tf.nn.depthwise_conv2d_native(x, f, [1, 1, 1, 1], "SAME")
    run = tf.Session(graph=g).make_callable(y, feed_list=[x])
    xs = np.random.rand(n, h, w, c).astype(np.float32)
    return lambda: run(xs)


@workload
def tf1_mlp(sizes, adam, lr, batch):
    import numpy as np
    tf = tf1()
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(0)
        x = tf.placeholder(tf.float32, [batch, sizes[0]])
        y = tf.placeholder(tf.int32, [batch])
        h = x
        for i in range(len(sizes) - 1):
            w = tf.Variable(tf.glorot_uniform_initializer()((sizes[i], sizes[i + 1])))
            h = tf.matmul(h, w) + tf.Variable(tf.zeros([sizes[i + 1]]))
            if i < len(sizes) - 2:
                h = tf.nn.relu(h)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        opt = tf.train.AdamOptimizer(lr) if adam else tf.train.GradientDescentOptimizer(lr)
        train = opt.minimize(loss)
        init = tf.global_variables_initializer()
    sess = tf.Session(graph=g)
    sess.run(init)
    step = sess.make_callable(train, feed_list=[x, y])
    xs = np.random.default_rng(0).random((batch, sizes[0]), dtype=np.float32)
    ys = np.arange(batch, dtype=np.int32) % sizes[-1]
    return lambda: step(xs, ys)


def tf1_batch_sizes(tf, ds):
    """A callable that takes the next batch of a repeating dataset and fetches
    its size (the batch stays in the session, as moonflow's bench does)."""
    nxt = tf.data.make_one_shot_iterator(ds).get_next()
    size = tf.size(nxt[0] if isinstance(nxt, tuple) else nxt)
    return tf.Session().make_callable(size)


@workload
def tf1_data_map(n, width, batch):
    """map(x * 2 + 1):batch(batch) over n rows of width float32."""
    import numpy as np
    tf = tf1()
    x = (np.arange(n * width) % 1000 / 100).astype(np.float32).reshape(n, width)
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_tensor_slices(x).map(lambda v: v * 2 + 1).batch(batch).repeat()
        return tf1_batch_sizes(tf, ds)


@workload
def tf1_data_batch(n, width, batch, shuffle_buffer):
    """batch(batch) of n rows of width float32 and an int32 label, shuffled
    first when shuffle_buffer > 0."""
    import numpy as np
    tf = tf1()
    x = (np.arange(n * width) % 17).astype(np.float32).reshape(n, width)
    y = (np.arange(n) % 10).astype(np.int32)
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        if shuffle_buffer > 0:
            ds = ds.shuffle(shuffle_buffer, seed=1)
        return tf1_batch_sizes(tf, ds.batch(batch).repeat())


def fresh_graph(tf, kept):
    """Frees the graph the previous call kept, untimed, and makes a new one."""
    kept.clear()
    gc.collect()
    g = tf.Graph()
    kept.append(g)
    return g


@workload
def tf1_chain(n):
    """y = y + 1 (a Const and an Add per step) until the graph holds n ops;
    figure bytes_per_op: the resident size it grew by in the first call."""
    tf = tf1()
    kept = []

    def call():
        g = fresh_graph(tf, kept)
        rss0 = rss_bytes()
        t0 = time.perf_counter()
        with g.as_default():
            y = tf.constant(0.0)
            for _ in range(n // 2):
                y = y + 1
        seconds = time.perf_counter() - t0
        if "bytes_per_op" not in timed.figures:
            gc.collect()
            timed.figures["bytes_per_op"] = (rss_bytes() - rss0) / n
        return seconds
    timed = Timed(call)
    return timed


def tf1_mlp_loss(tf, depth, width):
    """A depth-layer MLP of width units, zero-initialised, and a square loss."""
    h = tf.placeholder(tf.float32, [None, width])
    for _ in range(depth):
        w = tf.Variable(tf.zeros([width, width]))
        b = tf.Variable(tf.zeros([width]))
        h = tf.nn.relu(tf.matmul(h, w) + b)
    return tf.reduce_mean(tf.square(h))


@workload
def tf1_mlp_graph(depth, width, part):
    """Builds the MLP in a new graph, then its gradients or an SGD minimize:
    part ("build", "gradients", "minimize") is the step timed."""
    tf = tf1()
    kept = []

    def call():
        with fresh_graph(tf, kept).as_default():
            t0 = time.perf_counter()
            loss = tf1_mlp_loss(tf, depth, width)
            t1 = time.perf_counter()
            if part == "build":
                return t1 - t0
            if part == "gradients":
                tf.gradients(loss, tf.trainable_variables())
            else:
                tf.train.GradientDescentOptimizer(0.1).minimize(loss)
            return time.perf_counter() - t1
    return Timed(call)


def protobuf_field(number, payload):
    """One length-delimited protobuf field: key, varint length, bytes."""
    head, size = [number << 3 | 2], len(payload)
    while True:
        head.append(size & 0x7F | (0x80 if size > 0x7F else 0))
        size >>= 7
        if not size:
            return bytes(head) + payload


@workload
def tf1_import(n):
    """Imports a binary GraphDef of n ops (x + c chained) into a new graph,
    reading and parsing the file included. The file's Add nodes are the one
    TensorFlow built for x + c, renamed and rewired as its own names and
    inputs would be, appended to the GraphDef's bytes (its repeated field
    1): building them through Python would take minutes."""
    import tempfile
    tf = tf1()
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [], name="x")
        c = tf.constant(1.0)
        y = x + c
        graph_def = g.as_graph_def()
    node = tf.NodeDef()
    node.CopyFrom(next(d for d in graph_def.node if d.name == y.op.name))
    assert list(node.input) == [x.op.name, c.op.name], node.input
    parts = [graph_def.SerializeToString()]
    for i in range(1, n - 2):
        node.input[0] = y.op.name if i == 1 else "%s_%d" % (y.op.name, i - 1)
        node.name = "%s_%d" % (y.op.name, i)
        parts.append(protobuf_field(1, node.SerializeToString()))
    data = b"".join(parts)
    fd, path = tempfile.mkstemp(suffix=".pb")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    atexit.register(os.remove, path)
    kept = []

    def call():
        with fresh_graph(tf, kept).as_default():
            t0 = time.perf_counter()
            d = tf.GraphDef()
            with open(path, "rb") as f:
                d.ParseFromString(f.read())
            tf.import_graph_def(d, name="")
            return time.perf_counter() - t0
    return Timed(call)


def serve(lines, reply):
    calls, prepares, finishes = {}, {}, {}
    for line in lines:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            return
        try:
            if words[0] == "version":
                reply("ok " + str(importlib.import_module(words[1]).__version__))
            elif words[0] == "setup":
                if words[2] not in WORKLOADS:
                    raise KeyError("no workload named " + words[2])
                made = WORKLOADS[words[2]](*[ast.literal_eval(w) for w in words[3:]])
                parts = made if isinstance(made, tuple) else (made,)
                calls[words[1]], prepares[words[1]], finishes[words[1]] = (parts + (None, None))[:3]
                reply("ok")
            elif words[0] == "run":
                fn, prepare, n = calls[words[1]], prepares[words[1]], int(words[2])
                if prepare:
                    prepare()
                if isinstance(fn, Timed):
                    seconds = sum(fn.call() for _ in range(n))
                else:
                    t0 = time.perf_counter()
                    for _ in range(n):
                        fn()
                    if finishes[words[1]]:
                        finishes[words[1]]()
                    seconds = time.perf_counter() - t0
                reply("ok %.9g" % seconds)
            elif words[0] == "figure":
                fn = calls[words[1]]
                if not isinstance(fn, Timed) or words[2] not in fn.figures:
                    raise KeyError("workload %s has measured no %s" % (words[1], words[2]))
                reply("ok %.9g" % fn.figures[words[2]])
            else:
                reply("err unknown command " + words[0])
        except Exception as e:  # the bench reports it and goes on
            reply("err %s: %s" % (type(e).__name__, " ".join(str(e).split())[:200]))


if __name__ == "__main__":
    protocol_out = sys.stdout
    sys.stdout = sys.stderr  # what libraries print stays off the protocol

    def reply(text):
        protocol_out.write(text + "\n")
        protocol_out.flush()
    serve(sys.stdin, reply)
