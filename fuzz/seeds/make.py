#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ from the filters' fixtures (real
kube-apiserver lists) and a few hand-written requests. Run from the repository root:
`python3 fuzz/seeds/make.py`. Each target's input format is in its file's doc comment."""

import glob
import hashlib
import json
import os

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def put(target, data):
    directory = os.path.join(CORPUS, target)
    os.makedirs(directory, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


SEEDS = [b"\x01\x00\x00\x00", b"\x35\x9a\x11\x07"]

lists = []
for path in sorted(glob.glob(os.path.join(ROOT, "filters", "*", "fixtures", "*.json"))):
    with open(path, "rb") as f:
        raw = f.read()
    value = json.loads(raw)
    if "items" in value:
        lists.append((raw, value))

objects = []
for raw, value in lists:
    for seed in SEEDS:
        put("list_framer", seed + raw)
    put("list_framer", SEEDS[0] + json.dumps(value, separators=(",", ":")).encode())
    objects.extend(value["items"][:2])
for body in [
    b'{"kind":"List","apiVersion":"v1","metadata":{},"items":[]}',
    b'{"kind":"List","items":[{"a":"]}[{"},{}],"metadata":{"resourceVersion":"9","continue":"x"}}',
    b'{"kind":"Status","status":"Failure","message":"items [ ]","code":410}',
    b'{"metadata":{"items":[1]},"items" : [ {"b":[{}]} , {} ] }',
]:
    put("list_framer", SEEDS[1] + body)

compact = [json.dumps(o, separators=(",", ":")).encode() for o in objects]
events = []
for kind, obj in zip(["ADDED", "MODIFIED", "DELETED", "ADDED"], compact):
    events.append(b'{"type":"%s","object":%s}' % (kind.encode(), obj))
events.append(b'{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"99"}}}')
events.append(
    b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":410,"reason":"Expired"}}'
)
for seed in SEEDS:
    put("watch_framer", seed + b"\n".join(events) + b"\n")
for event in events:
    put("watch_framer", SEEDS[0] + event + b"\n")
put("watch_framer", SEEDS[1] + b'{"type":"ADDED","object":{"metadata":{"name":"a}\\"{"}}}\r\n  {"type":"NOPE","object":{}}')

for obj, raw in zip(objects, compact):
    put("object_meta", raw)
    put("object_meta", json.dumps(obj, indent=1).encode())
    put("sdk_object", b"\xff" + raw)
    put("sdk_object", b"\x00\x01\x02\x03\x04\x05\x06\x07\xff" + json.dumps(obj, indent=1).encode())
    put("replacement", raw)
    edited = json.loads(raw)
    edited.setdefault("metadata", {}).setdefault("labels", {})["edge"] = "yes"
    put("replacement", raw + b"\xff" + json.dumps(edited, separators=(",", ":")).encode())
    renamed = json.loads(raw)
    renamed["metadata"]["name"] = "other"
    put("replacement", raw + b"\xff" + json.dumps(renamed, separators=(",", ":")).encode())
    put("replacement", raw + b"\xff" + raw[: len(raw) // 2])

pod = compact[-1] if compact else b"{}"
protobuf = b"k8s\x00\n\x1f\n\x16coordination.k8s.io/v1\x12\x05Lease\x12\x08\n\x06\n\x04node"
for choice in range(0, 64, 3):
    put("local_write", bytes([choice]) + SEEDS[1] + (protobuf if choice & 8 else pod))
put("local_write", bytes([0]) + SEEDS[0] + b"[1]")
put("local_write", bytes([2]) + SEEDS[0] + b'{"kind":"Lease","spec":{"holderIdentity":"edge-1"}}')

hub = [
    (0, b"/v1/healthz", b""),
    (0, b"/v1/readyz", b""),
    (1, b"/metrics", b""),
    (0, b"/v1/cache", b""),
    (0, b"/v1/filters", b""),
    (0, b"/v1/cache/object?component=kubelet&resource=secrets&name=kube-system/s", b""),
    (0, b"/v1/cache/object?component=kubelet&resource=configmaps.v1.core&name=kube-system/c", b""),
    (0, b"/v1/cache/object?component=kubelet&resource=secrets.v1&name=s", b""),
    (2, b"/v1/token", b'{"jointoken":"abcdef.0123456789abcdef"}'),
    (3, b"/v1/token", b'{"jointoken":""}'),
    (4, b"/v1/cache", b""),
    (0x80, b"/v1/cache/object?component=kubelet&resource=secrets&name=kube-system/s", b""),
    (0x80, b"/v1/readyz", b""),
]
for choice, target, body in hub:
    put("hub", bytes([choice]) + target + b"\n" + body)

requests = [
    (0, b"/api/v1/namespaces/default/pods?watch=true&resourceVersion=7&allowWatchBookmarks=true"),
    (0, b"/api/v1/pods?fieldSelector=spec.nodeName%3Dedge-1&limit=500"),
    (0, b"/api/v1/nodes/edge-1"),
    (0, b"/apis/discovery.k8s.io/v1/endpointslices?labelSelector=a%3Db%2Cc!%3Dd&timeoutSeconds=300"),
    (0, b"/api/v1/watch/namespaces/kube-system/configmaps/kube-proxy"),
    (0, b"/api/v1/namespaces/kube-system/services?fieldSelector=metadata.name%3Dkube-dns"),
    (2, b"/api/v1/namespaces/default/events"),
    (3, b"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/edge-1"),
    (4, b"/api/v1/nodes/edge-1/status"),
    (5, b"/api/v1/namespaces/default/pods"),
    (5, b"/api/v1/namespaces/default/pods/p"),
    (0, b"/api/v1/namespaces/default/pods/p/log?follow=true"),
    (0, b"/api/v1/namespaces/default/pods/p/proxy/metrics"),
    (0, b"/api/v1/namespaces/ns/status"),
    (0, b"/apis/apps.openyurt.io/v1beta1/nodepools?continue=abc&watch=0"),
    (0, b"/version"),
    (0, b"/apis"),
    (0, b"/api/v1"),
    (6, b"/api/v1/pods"),
]
for method, target in requests:
    put("request_info", bytes([method]) + target)

# protobuf_watch: kube-apiserver 1.20.2's own protobuf watches (gateway/src/stream/protobuf/
# recorded/), whole, frame by frame, and the EndpointSlices relabelled discovery.k8s.io/v1
# (1.20 serves no v1; the fields the two share are numbered alike). The seed's top byte picks
# the resource: 0 Services, 1 v1 EndpointSlices, 2 v1beta1 EndpointSlices.
RECORDED = os.path.join(ROOT, "gateway", "src", "stream", "protobuf", "recorded")


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def fields(message):
    """The (number, wire type, value) of a message's fields; a value is bytes or an int."""
    at, out = 0, []
    while at < len(message):
        key, at = read_varint(message, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = read_varint(message, at)
        elif wire == 2:
            length, at = read_varint(message, at)
            value, at = message[at : at + length], at + length
        else:
            raise ValueError("wire type %d" % wire)
        out.append((number, wire, value))
    return out


def read_varint(data, at):
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def encode(parts):
    out = bytearray()
    for number, wire, value in parts:
        out += varint(number << 3 | wire)
        out += varint(value) if wire == 0 else varint(len(value)) + value
    return bytes(out)


def replace_bytes(message, number, change):
    return encode([(n, w, change(v) if n == number and w == 2 else v) for n, w, v in fields(message)])


def frames_of(stream):
    at, out = 0, []
    while at + 4 <= len(stream):
        length = int.from_bytes(stream[at : at + 4], "big")
        out.append(stream[at + 4 : at + 4 + length])
        at += 4 + length
    return out


def framed(frames):
    return b"".join(len(f).to_bytes(4, "big") + f for f in frames)


def relabelled(frame, api_version):
    def raw(unknown):
        assert unknown.startswith(b"k8s\0")
        meta = lambda tm: replace_bytes(tm, 1, lambda _: api_version)
        return b"k8s\0" + replace_bytes(unknown[4:], 1, meta)

    return replace_bytes(frame, 2, lambda ext: replace_bytes(ext, 1, raw))


for name, top in [("services.pb", 0), ("endpointslices-v1beta1.pb", 2)]:
    with open(os.path.join(RECORDED, name), "rb") as f:
        stream = f.read()
    seed = bytes([0x35, 0x9A, 0x11, top])
    frames = frames_of(stream)
    put("protobuf_watch", seed + stream)
    for frame in frames:
        put("protobuf_watch", seed + framed([frame]))
    if top == 2:
        v1 = [relabelled(frame, b"discovery.k8s.io/v1") for frame in frames]
        put("protobuf_watch", bytes([0x35, 0x9A, 0x11, 1]) + framed(v1))
