#!/usr/bin/env python3
"""Builds schema.json, the protobuf schema table used by ../protobuf.rs.

Usage:
    gen.py API_GIT APIMACHINERY_GIT APIEXTENSIONS_GIT KUBE_AGGREGATOR_GIT > schema.json

Each argument is a git directory (bare clone) of the matching kubernetes repository
(k8s.io/api, k8s.io/apimachinery, k8s.io/apiextensions-apiserver, k8s.io/kube-aggregator).
The files are read at HEAD with `git show`; nothing is written besides stdout.
Run by hand when the Kubernetes API changes; the build only reads schema.json. The
committed schema.json comes from the default branches of kubernetes/api 10b39a39,
kubernetes/apimachinery eed236ce, kubernetes/apiextensions-apiserver 1aa2717a and
kubernetes/kube-aggregator 232ca687 (newer than release-1.32; proto field numbers never
change, so older clients decode the same).

Kinds come only from stable versions (v1, v2, ...); other versions are read for the
messages stable ones refer to. For each package the script reads
`generated.proto` (field numbers and wire types) and the package's Go type declarations
(JSON names, omitempty/omitzero, pointers, inlined fields), joined on (message, number).

Output format:
    {
      "kinds": {"<apiVersion>/<Kind>": "<message>", ...},
      "meta_kinds": {"<Kind>": "<message>", ...},      # meta/v1 kinds valid for any apiVersion
      "wrappers": ["<message>", ...],                   # Go slice types: JSON is the items array
      "messages": {"<message>": [[number, "jsonName", "type", flags], ...], ...}
    }
Types are proto scalar names, message names (fully qualified, no leading dot) or
"map<K,V>". Flags: 1 repeated, 2 inline (merge the sub-object into the parent),
4 omit when empty (Go omitempty on a non-pointer scalar/slice/map),
8 omit when zero (Go omitzero on a non-pointer), 16 zero value when absent
(non-pointer scalar without omitempty: Go's JSON always carries it).
"""

import json
import re
import subprocess
import sys

SCALARS = {
    "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
    "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes",
}

F_REPEATED, F_INLINE, F_OMIT_EMPTY, F_OMIT_ZERO, F_DEFAULT = 1, 2, 4, 8, 16

# Messages the decoder converts by hand; their fields are still listed but not followed.
OPAQUE = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "k8s.io.apimachinery.pkg.runtime.RawExtension",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
    "k8s.io.apimachinery.pkg.api.resource.Quantity",
    "k8s.io.apimachinery.pkg.api.resource.QuantityValue",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON",
}

# meta/v1 kinds valid for any group version: the option kinds a request body may be,
# Status, and PartialObjectMetadata, the metadata-only form of any object (its list,
# PartialObjectMetadataList, has the layout of every <Kind>List).
META_KINDS = [
    "DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions", "Status",
    "PartialObjectMetadata",
]

STABLE = re.compile(r"/v\d+/generated\.proto$")


def git(gitdir, *args):
    return subprocess.run(
        ["git", "--git-dir=" + gitdir, *args], check=True, capture_output=True, text=True
    ).stdout


def strip_comments(text):
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def parse_proto(text):
    text = strip_comments(text)
    package = re.search(r"^\s*package\s+([\w.]+)\s*;", text, re.M).group(1)
    messages = {}
    for m in re.finditer(r"^message\s+(\w+)\s*\{(.*?)^\}", text, re.M | re.S):
        fields = []
        for fm in re.finditer(
            r"^\s*(?:(optional|repeated|required)\s+)?(map\s*<\s*([\w.]+)\s*,\s*([\w.]+)\s*>|[\w.]+)"
            r"\s+(\w+)\s*=\s*(\d+)\s*(?:\[([^\]]*)\])?\s*;",
            m.group(2),
            re.M,
        ):
            label, typ, mk, mv, name, num, _opts = fm.groups()
            fields.append(
                {
                    "repeated": label == "repeated",
                    "type": typ if mk is None else None,
                    "map": (mk, mv) if mk is not None else None,
                    "name": name,
                    "number": int(num),
                }
            )
        if re.search(r"^\s*message\s", m.group(2), re.M):
            sys.exit(f"nested message in {package}.{m.group(1)} is not supported")
        messages[package + "." + m.group(1)] = fields
    return package, messages


def resolve(package, typ):
    typ = typ.lstrip(".")
    if typ in SCALARS:
        return typ
    if "." in typ:
        return typ
    return package + "." + typ


GO_FIELD = re.compile(r"^\s*([^`]*?)\s*`([^`]*)`")


def parse_tag(tag):
    out = {}
    for k, v in re.findall(r'(\w+):"([^"]*)"', tag):
        out[k] = v
    return out


def parse_go(texts):
    """Returns (structs, slices, kinds) for a package's Go sources.

    structs: {Type: {number: info}}; slices: set of types declared as `type X []Y`;
    kinds: set of struct types that inline metav1.TypeMeta (top-level kinds)."""
    structs, slices, kinds = {}, set(), set()
    for text in texts:
        lines = text.splitlines()
        for i, line in enumerate(lines):
            sm = re.match(r"^type\s+(\w+)\s+\[\]", line)
            if sm:
                slices.add(sm.group(1))
                continue
            sm = re.match(r"^type\s+(\w+)\s+struct\s*\{\s*$", line)
            if not sm:
                continue
            name = sm.group(1)
            fields = {}
            for body in lines[i + 1 :]:
                if body.startswith("}"):
                    break
                code = body.strip()
                if code.startswith("//"):
                    continue
                fm = GO_FIELD.match(body)
                if not fm:
                    continue
                decl, tag = fm.group(1).split(), parse_tag(fm.group(2))
                embedded = len(decl) == 1
                jname0 = tag.get("json", "").split(",")[0]
                if embedded and decl[0].split(".")[-1] == "TypeMeta" and jname0 == "":
                    kinds.add(name)
                if "protobuf" not in tag or tag["protobuf"] == "-":
                    continue
                gotype = decl[-1]
                pb = tag["protobuf"].split(",")
                jparts = tag.get("json", "").split(",")
                jname, jopts = jparts[0], set(jparts[1:])
                fields[int(pb[1])] = {
                    "json": jname,
                    "inline": embedded and jname == "",
                    "omitempty": "omitempty" in jopts,
                    "omitzero": "omitzero" in jopts,
                    "pointer": gotype.startswith("*"),
                    "gotype": gotype,
                }
            structs[name] = fields
    return structs, slices, kinds


def package_sources(gitdir, proto_path):
    directory = proto_path.rsplit("/", 1)[0]
    names = git(gitdir, "ls-tree", "--name-only", "HEAD", directory + "/").split()
    gos = [
        n
        for n in names
        if n.endswith(".go")
        and not n.endswith("_test.go")
        and not n.endswith("generated.pb.go")
        and "zz_generated" not in n
        and "swagger_doc" not in n
    ]
    return [git(gitdir, "show", "HEAD:" + n) for n in gos], directory


def group_name(texts):
    for text in texts:
        m = re.search(r'^const GroupName\s*(?:string)?\s*=\s*"([^"]*)"', text, re.M)
        if m:
            return m.group(1)
    for text in texts:
        m = re.search(r"^// \+groupName=(\S*)", text, re.M)
        if m:
            return m.group(1)
    return None


def main():
    api, machinery, apiext, aggregator = sys.argv[1:5]
    sources = []
    for gitdir, prefixes in (
        (api, ("",)),
        (
            machinery,
            (
                "pkg/apis/meta/v1/",
                "pkg/runtime/generated",
                "pkg/util/intstr/",
                "pkg/api/resource/",
            ),
        ),
        (apiext, ("pkg/apis/apiextensions/v1/",)),
        (aggregator, ("pkg/apis/apiregistration/v1/",)),
    ):
        for path in git(gitdir, "ls-tree", "-r", "--name-only", "HEAD").split():
            if not path.endswith("generated.proto"):
                continue
            if not any(path.startswith(p) for p in prefixes):
                continue
            sources.append((gitdir, path))

    messages = {}  # full name -> list of field dicts (merged)
    wrappers = set()
    kinds = {}
    meta_kinds = {}
    for gitdir, path in sources:
        package, msgs = parse_proto(git(gitdir, "show", "HEAD:" + path))
        texts, _ = package_sources(gitdir, path)
        structs, slices, gokinds = parse_go(texts)
        group = group_name(texts) if gitdir != machinery or "meta/v1" in path else None
        if not STABLE.search("/" + path):
            group = None  # only stable versions contribute kinds
        version = package.rsplit(".", 1)[1]
        for full, fields in msgs.items():
            short = full.rsplit(".", 1)[1]
            goinfo = structs.get(short)
            if goinfo is None and short in slices:
                wrappers.add(full)
                goinfo = {}
            out = []
            for f in fields:
                g = None if goinfo is None else goinfo.get(f["number"])
                if g is None and full not in wrappers:
                    g = "missing"
                if f["map"]:
                    typ = "map<{},{}>".format(
                        resolve(package, f["map"][0]), resolve(package, f["map"][1])
                    )
                else:
                    typ = resolve(package, f["type"])
                out.append({**f, "rtype": typ, "go": g})
            messages[full] = out
            if short in gokinds and not short.endswith("List"):
                if "meta/v1" in path and gitdir == machinery:
                    if short in META_KINDS:
                        meta_kinds[short] = full
                elif group is not None:
                    api_version = version if group == "" else f"{group}/{version}"
                    kinds[f"{api_version}/{short}"] = full

    # Keep only messages reachable from the kinds.
    reach = set()
    todo = list(kinds.values()) + list(meta_kinds.values())
    while todo:
        name = todo.pop()
        if name in reach:
            continue
        if name not in messages:
            sys.exit(f"unknown message {name}")
        reach.add(name)
        for f in messages[name]:
            if f["go"] == "missing" and name not in OPAQUE:
                sys.exit(f"no Go field for {name} #{f['number']} ({f['name']})")
        if name in OPAQUE:
            continue
        for f in messages[name]:
            for t in re.findall(r"[\w.]+", f["rtype"]):
                if t not in SCALARS and t != "map":
                    todo.append(t)

    def is_struct(typ):
        return typ not in SCALARS and not typ.startswith("map<") and typ not in wrappers

    table = {}
    for name in sorted(reach):
        rows = []
        for f in sorted(messages[name], key=lambda f: f["number"]):
            g = f["go"] if isinstance(f["go"], dict) else {"json": f["name"], "inline": False, "omitempty": False,
                            "omitzero": False, "pointer": False, "gotype": ""}
            flags = 0
            if f["repeated"]:
                flags |= F_REPEATED
            if g["inline"]:
                flags |= F_INLINE
                if not is_struct(f["rtype"]):
                    sys.exit(f"inline non-message {name}.{f['name']}")
            if g["omitempty"] and not g["pointer"] and not (
                is_struct(f["rtype"]) and not f["repeated"]
            ):
                flags |= F_OMIT_EMPTY
            if g["omitzero"] and not g["pointer"]:
                flags |= F_OMIT_ZERO
            if (
                not g["omitempty"]
                and not g["omitzero"]
                and not g["pointer"]
                and not f["repeated"]
                and f["rtype"] in SCALARS
                and f["rtype"] != "bytes"
                and name not in wrappers
            ):
                flags |= F_DEFAULT
            jname = "" if g["inline"] else g["json"]
            if jname in ("", "-") and not g["inline"]:
                jname = f["name"]
            rows.append([f["number"], jname, f["rtype"], flags])
        table[name] = rows

    out = {
        "kinds": dict(sorted(kinds.items())),
        "meta_kinds": dict(sorted(meta_kinds.items())),
        "wrappers": sorted(w for w in wrappers if w in reach),
        "messages": table,
    }
    # One message per line keeps diffs readable.
    sys.stdout.write("{\n")
    keys = list(out)
    for ki, key in enumerate(keys):
        val = out[key]
        sep = "," if ki + 1 < len(keys) else ""
        if key == "messages":
            sys.stdout.write('"messages": {\n')
            items = list(val.items())
            for i, (k, v) in enumerate(items):
                comma = "," if i + 1 < len(items) else ""
                sys.stdout.write(
                    json.dumps(k) + ": " + json.dumps(v, separators=(",", ":")) + comma + "\n"
                )
            sys.stdout.write("}" + sep + "\n")
        else:
            sys.stdout.write(
                json.dumps(key) + ": " + json.dumps(val, separators=(",", ":")) + sep + "\n"
            )
    sys.stdout.write("}\n")


if __name__ == "__main__":
    main()
