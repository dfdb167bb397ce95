"""Tiny BERT-shaped pooling models that vLLM serves on a CPU: an embedder and a cross-encoder reranker.

Like the scripted chat models (scripted_model.py), their weights are designed, not trained (numpy only):

- vocabulary: whole words (lowercased, split on whitespace and punctuation), each either a word of one of three
  TOPICS (animals, finance, weather) or a filler word
  any other word is [UNK]. Every vector is zero-mean, so
  BERT's LayerNorms keep its direction.
- embedder (`BertModel`, a sentence-transformers model: mean pooling, then normalize): attention and MLP are
  zero, so a text's embedding is the normalized mean of its words' vectors; a word of topic t points along the
  topic's direction plus a small part of its own. Texts of one topic are near (cosine ~0.9), texts of different
  topics orthogonal (~0); filler words add nothing. `is_matryoshka`: `dimensions` may shorten it.
- reranker (`BertForSequenceClassification`, 1 label: a cross-encoder): the two segments (query, document) differ
  in their token type embedding; attention head 1 reads only the query's tokens, head 2 only the document's, and
  carry their topic shares to separate dimensions
  per topic, three MLP neurons compute
  relu(a+b-th) - relu(a-th) - relu(b-th) ~ min(a, b): "the query AND the document are about topic t". The
  classifier reads that sum: documents of the query's topic score high (more of their words on topic: higher),
  the others all get the same low score. Designed order for RERANK_QUERY: see RERANK_ORDER.

    python -m generator.demo.pooling_models .cache/demo-models    # writes embedder/ and reranker/
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from .scripted_model import write_model

# what the integration tests and the docs send (tests/integration/test_pooling.py)
NEAR = ("The cat sat on the mat", "A kitten slept on a rug")  # one topic: near
FAR = "Stock prices fell sharply"  # another topic: far from both
RERANK_QUERY = "where did the cat sleep"
RERANK_DOCUMENTS = [
    "Stock prices fell sharply today",
    "The cat slept on the mat",
    "Snow and wind in the forecast",
    "A kitten and a puppy",
    "The dog barks at the rain",
]
RERANK_ORDER = [1, 3, 4]  # then 0 and 2, which tie (off topic)
KINDS = ("embedder", "reranker")
CONTEXT = 256  # the demo's --max-model-len for both (max_position_embeddings is MAX_POS)

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
TOPICS = {  # topic -> words; every other word (and [UNK]) is a zero vector: it carries no meaning
    "animals": [
        "cat",
        "cats",
        "kitten",
        "dog",
        "dogs",
        "puppy",
        "pet",
        "pets",
        "mat",
        "rug",
        "sat",
        "slept",
        "sleeps",
        "purrs",
        "barks",
    ],
    "finance": [
        "stock",
        "stocks",
        "price",
        "prices",
        "market",
        "markets",
        "fell",
        "rose",
        "shares",
        "bank",
        "banks",
        "rates",
        "interest",
    ],
    "weather": [
        "rain",
        "sun",
        "sunny",
        "cloud",
        "clouds",
        "storm",
        "snow",
        "wind",
        "forecast",
        "weather",
        "cold",
        "warm",
    ],
}
FILLER = [
    "the",
    "a",
    "an",
    "on",
    "of",
    "in",
    "and",
    "is",
    "was",
    "to",
    "where",
    "did",
    "what",
    "how",
    "for",
    "today",
    "sharply",
]
HIDDEN, HEADS, INTER, MAX_POS = 64, 2, 64, 512
WORDS = [w for ws in TOPICS.values() for w in ws] + FILLER
VOCAB = {t: i for i, t in enumerate(SPECIALS + WORDS)}
VOCAB_SIZE = len(VOCAB)


def _pair(v: np.ndarray, k: int, x: float) -> None:
    """Zero-mean: +x on dim 2k, -x on dim 2k+1 (LayerNorm keeps the direction)."""
    v[2 * k] += x
    v[2 * k + 1] -= x


def _word_vectors() -> np.ndarray:
    emb = np.zeros((VOCAB_SIZE, HIDDEN), np.float32)
    for t, words in enumerate(TOPICS.values()):
        for i, w in enumerate(words):
            v = emb[VOCAB[w]]
            _pair(v, t, 1.0)  # the topic's direction (dims 0..5)
            _pair(v, 4 + (i % 24), 0.35)  # a word's own small part (dims 8..55)
    return emb


# --- geometry ---------------------------------------------------------------------------------------------
# dims 0..5: topic pairs of a word; 8..55: a word's own part; 56..57: segment (query +, document -);
# after the attention: dims 0..5 hold the query's topics (head 1 reads the query), 32..37 the document's (head 2)

SEG = 56


def _type_embeddings(rerank: bool) -> np.ndarray:
    t = np.zeros((2, HIDDEN), np.float32)
    if rerank:
        _pair(t[0], SEG // 2, 1.0)
        _pair(t[1], SEG // 2, -1.0)
    return t


NOISE = 29  # dims 58/59: what every token that is not a topic word carries, so all tokens have one norm


def _reranker_word_vectors() -> np.ndarray:
    emb = np.zeros((VOCAB_SIZE, HIDDEN), np.float32)
    topic_of = {w: t for t, ws in enumerate(TOPICS.values()) for w in ws}
    for tok, i in VOCAB.items():
        if tok in topic_of:
            _pair(emb[i], topic_of[tok], 1.0)
        elif tok != "[PAD]":
            _pair(emb[i], NOISE, 1.0)
    return emb


N_TOPICS = len(TOPICS)

REL = 20  # dims 40/41: relevance


def reranker_tensors(c=20.0, gq=8.0, gd=2.0, theta=5.0, pool_gain=0.5, cls_w=4.0, cls_b=-2.0) -> dict:
    f = np.float32
    H = HIDDEN
    word = _reranker_word_vectors()
    t = {}
    t["embeddings.word_embeddings.weight"] = word
    t["embeddings.position_embeddings.weight"] = np.zeros((MAX_POS, H), f)
    t["embeddings.token_type_embeddings.weight"] = _type_embeddings(True)
    t["embeddings.LayerNorm.weight"] = np.ones(H, f)
    t["embeddings.LayerNorm.bias"] = np.zeros(H, f)
    Wq = np.zeros((H, H), f)
    bq = np.zeros(H, f)
    Wk = np.zeros((H, H), f)
    Wv = np.zeros((H, H), f)
    bq[0], Wk[0, SEG] = c, 1.0  # head 1 (dims 0..31): the query's tokens (segment +)
    bq[32], Wk[32, SEG] = -c, 1.0  # head 2 (dims 32..63): the document's tokens (segment -)
    for k in range(2 * N_TOPICS):
        Wv[k, k] = 1.0  # head 1 carries the topics to dims 0..5
        Wv[32 + k, k] = 1.0  # head 2 to dims 32..37
    p = "encoder.layer.0."
    t[p + "attention.self.query.weight"] = Wq
    t[p + "attention.self.query.bias"] = bq
    t[p + "attention.self.key.weight"] = Wk
    t[p + "attention.self.key.bias"] = np.zeros(H, f)
    t[p + "attention.self.value.weight"] = Wv
    t[p + "attention.self.value.bias"] = np.zeros(H, f)
    t[p + "attention.output.dense.weight"] = np.eye(H, dtype=f)
    t[p + "attention.output.dense.bias"] = np.zeros(H, f)
    t[p + "attention.output.LayerNorm.weight"] = np.ones(H, f)
    t[p + "attention.output.LayerNorm.bias"] = np.zeros(H, f)
    W1 = np.zeros((INTER, H), f)
    b1 = np.zeros(INTER, f)
    W2 = np.zeros((H, INTER), f)
    # per topic k, three neurons: relu(a+b-th) - relu(a-th) - relu(b-th) ~ min(a, b, th) for a, b >= 0: an AND of
    # "the query is about k" (a, its topic share, amplified) and "the document is about k" (b, its share)
    for k in range(N_TOPICS):
        for j, (wq, wd, sign) in enumerate(((gq, gd, 1.0), (gq, 0.0, -1.0), (0.0, gd, -1.0))):
            n = 3 * k + j
            W1[n, 2 * k] = wq
            W1[n, 32 + 2 * k] = wd
            b1[n] = -theta
            W2[2 * REL, n] = sign
            W2[2 * REL + 1, n] = -sign
    t[p + "intermediate.dense.weight"] = W1
    t[p + "intermediate.dense.bias"] = b1
    t[p + "output.dense.weight"] = W2
    t[p + "output.dense.bias"] = np.zeros(H, f)
    t[p + "output.LayerNorm.weight"] = np.ones(H, f)
    t[p + "output.LayerNorm.bias"] = np.zeros(H, f)
    Wp = np.zeros((H, H), f)
    Wp[0, 2 * REL] = pool_gain
    t["pooler.dense.weight"] = Wp
    t["pooler.dense.bias"] = np.zeros(H, f)
    Wc = np.zeros((1, H), f)
    Wc[0, 0] = cls_w
    t["classifier.weight"] = Wc
    t["classifier.bias"] = np.array([cls_b], f)
    return t


def embedder_tensors() -> dict:
    f = np.float32
    H = HIDDEN
    t = {
        "embeddings.word_embeddings.weight": _word_vectors(),
        "embeddings.position_embeddings.weight": np.zeros((MAX_POS, H), f),
        "embeddings.token_type_embeddings.weight": _type_embeddings(False),
        "embeddings.LayerNorm.weight": np.ones(H, f),
        "embeddings.LayerNorm.bias": np.zeros(H, f),
    }
    p = "encoder.layer.0."
    for n, shape in (
        ("attention.self.query", (H, H)),
        ("attention.self.key", (H, H)),
        ("attention.self.value", (H, H)),
        ("attention.output.dense", (H, H)),
        ("intermediate.dense", (INTER, H)),
        ("output.dense", (H, INTER)),
    ):
        t[p + n + ".weight"] = np.zeros(shape, f)
        t[p + n + ".bias"] = np.zeros(shape[0], f)
    for n in ("attention.output.LayerNorm", "output.LayerNorm"):
        t[p + n + ".weight"] = np.ones(H, f)
        t[p + n + ".bias"] = np.zeros(H, f)
    return t


def tokenizer_json() -> dict:
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": VOCAB[s],
                "content": s,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for s in SPECIALS
        ],
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 1}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 1}},
            ],
            "special_tokens": {s: {"id": s, "ids": [VOCAB[s]], "tokens": [s]} for s in ("[CLS]", "[SEP]")},
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordLevel", "vocab": VOCAB, "unk_token": "[UNK]"},
    }


def config(kind: str, max_pos: int = MAX_POS) -> dict:
    c = {
        "architectures": ["BertModel" if kind == "embedder" else "BertForSequenceClassification"],
        "model_type": "bert",
        "vocab_size": VOCAB_SIZE,
        "hidden_size": HIDDEN,
        "num_hidden_layers": 1,
        "num_attention_heads": HEADS,
        "intermediate_size": INTER,
        "hidden_act": "gelu",
        "max_position_embeddings": max_pos,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "torch_dtype": "float32",
    }
    if kind == "reranker":
        c.update({"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}})
    else:
        c["is_matryoshka"] = True
    return c


def files(kind: str) -> dict[str, bytes]:
    from safetensors.numpy import save

    def js(o: object) -> bytes:
        return (json.dumps(o, indent=2) + "\n").encode()

    out = {
        "config.json": js(config(kind)),
        "tokenizer.json": js(tokenizer_json()),
        "tokenizer_config.json": js(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "model_max_length": MAX_POS,
                "cls_token": "[CLS]",
                "sep_token": "[SEP]",
                "pad_token": "[PAD]",
                "unk_token": "[UNK]",
                "do_lower_case": True,
                "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
            }
        ),
        "special_tokens_map.json": js(
            {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]"}
        ),
    }
    tensors = (
        embedder_tensors()
        if kind == "embedder"
        else {(k if k.startswith(("classifier",)) else "bert." + k): v for k, v in reranker_tensors().items()}
    )
    out["model.safetensors"] = save(dict(sorted(tensors.items())), metadata={"format": "pt"})
    if kind == "embedder":  # sentence-transformers: mean pooling, then normalize
        out["modules.json"] = js(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
            ]
        )
        out["1_Pooling/config.json"] = js(
            {"word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True}
        )
    return out


def build(out: Path, kind: str) -> Path:
    for name, data in files(kind).items():
        p = out / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return out


def build_model(out_dir: Path, kind: str) -> Path:
    """Write the model of `kind` into `out_dir`; idempotent (files whose bytes match are left alone)."""
    return write_model(Path(out_dir), files(kind), "POOLING", kind)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path, help="parent folder: writes OUT_DIR/embedder and OUT_DIR/reranker")
    args = ap.parse_args(argv)
    for kind in KINDS:
        print(build_model(args.out_dir / kind, kind))


if __name__ == "__main__":
    main()
