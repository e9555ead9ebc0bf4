"""Loads a log directory with TensorBoard's own reader (EventAccumulator) and
prints what it sees as JSON: per run, the scalars, histograms, images and
texts (tags, steps, values, buckets, sizes, strings), whether a graph is there, its
node names and each node's op type.
spec/summary_spec.lua runs it (in the virtualenv `make tensorboard-venv`
makes) and compares with what moonflow wrote.

    python3 tools/tensorboard_check.py LOGDIR
"""
import json
import sys

from tensorboard.backend.event_processing import event_accumulator


def main(logdir):
    acc = event_accumulator.EventAccumulator(logdir, size_guidance={
        event_accumulator.SCALARS: 0, event_accumulator.HISTOGRAMS: 0, event_accumulator.IMAGES: 0})
    acc.Reload()
    tags = acc.Tags()
    out = {"scalars": {}, "histograms": {}, "images": {}, "graph": bool(tags.get("graph"))}
    if out["graph"]:
        out["graph_nodes"] = sorted(node.name for node in acc.Graph().node)
        out["graph_ops"] = {node.name: node.op for node in acc.Graph().node}
    for tag in tags.get("scalars", []):
        out["scalars"][tag] = [[e.step, e.value] for e in acc.Scalars(tag)]
    for tag in tags.get("histograms", []):
        out["histograms"][tag] = [
            {"step": e.step, "min": e.histogram_value.min, "max": e.histogram_value.max,
             "num": e.histogram_value.num, "sum": e.histogram_value.sum,
             "sum_squares": e.histogram_value.sum_squares,
             "bucket_limit": list(e.histogram_value.bucket_limit), "bucket": list(e.histogram_value.bucket)}
            for e in acc.Histograms(tag)]
    for tag in tags.get("images", []):
        out["images"][tag] = [[e.step, e.width, e.height] for e in acc.Images(tag)]
    out["text"] = {}
    try:
        text_tags = acc.PluginTagToContent("text")
    except KeyError:  # no value names the text plugin
        text_tags = {}
    for tag in text_tags:
        out["text"][tag] = [
            {"step": e.step, "shape": [d.size for d in e.tensor_proto.tensor_shape.dim],
             "strings": [v.decode("utf-8") for v in e.tensor_proto.string_val]}
            for e in acc.Tensors(tag)]
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
