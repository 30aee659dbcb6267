#!/usr/bin/python3
"""Classical baselines for `regressd eval`, on random splits or contiguous blocks.

Computes, for every dataset of a folder laid out like shared/data, the six
baselines shared/data/README.md describes (RidgeCV, kNN k=10, random forest of
300 trees, HistGradientBoosting with defaults, an ARD RBF + white-noise
Gaussian process on at most 2,000 training rows, XGBoost of 500 trees; missing
features median-imputed for all but HistGradientBoosting) and the quantile
baseline for central 80% intervals (HistGradientBoosting, loss=quantile at 0.1
and 0.9), on the same folds `regressd eval --folds` uses:

  blocks  five contiguous fifths of the rows in file (time) order; the
          context of a fold is the other four fifths (numpy.array_split:
          the first n mod 5 folds hold one row more)
  random  the fixed splits in DIR/splits/<name>.csv (seed0…seed4)

It prints one JSON object shaped like baselines.json: per dataset and model the
mean R² and RMSE and the per-fold R² (fold_r2), suite means, intervals_80, and
data_sha256 (the SHA-256 of each CSV, so `regressd eval` applies recorded
figures only to the very data they were computed on).

Run it through scripts/baselines.sh, which installs Debian's python3-sklearn
and python3-xgboost when they are missing:

  scripts/baselines.sh --data ../shared/data --folds blocks > gpu/eval/recorded/baselines_blocks.json
"""
import argparse
import csv
import hashlib
import json
import math
import os
import sys
import warnings

import numpy as np
from sklearn.ensemble import (HistGradientBoostingRegressor,
                              RandomForestRegressor)
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.gaussian_process.kernels import WhiteKernel
from sklearn.impute import SimpleImputer
from sklearn.linear_model import RidgeCV
from sklearn.metrics import mean_squared_error, r2_score
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from xgboost import XGBRegressor

FOLDS = 5
GP_MAX_ROWS = 2000
ALPHA = 0.2  # central 80% interval


def missing(s):
    s = s.strip()
    return s == "" or s.lower() in ("na", "nan")


def load(data_dir):
    """Yields (name, file, features, X, y) for every *.csv, as eval reads it."""
    manifest = {}
    mpath = os.path.join(data_dir, "manifest.json")
    if os.path.exists(mpath):
        with open(mpath) as fh:
            for e in json.load(fh):
                manifest[e["file"]] = e
    for file in sorted(f for f in os.listdir(data_dir) if f.endswith(".csv")):
        with open(os.path.join(data_dir, file), newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
        header = [h.strip() for h in rows[0]]
        e = manifest.get(file, {})
        target = e.get("target") or header[-1]
        feats = e.get("features") or [h for h in header[:-1] if h != "time"]
        cols = [header.index(f) for f in feats]
        t = header.index(target)
        X = np.array([[math.nan if missing(r[c]) else float(r[c]) for c in cols] for r in rows[1:]])
        y = np.array([float(r[t]) for r in rows[1:]])
        yield file[:-4], file, X, y


def folds(data_dir, file, n, kind):
    """Test masks, one per fold."""
    if kind == "blocks":
        out = []
        for idx in np.array_split(np.arange(n), FOLDS):
            m = np.zeros(n, bool)
            m[idx] = True
            out.append(m)
        return out
    with open(os.path.join(data_dir, "splits", file), newline="") as fh:
        rows = list(csv.reader(fh))[1:]
    s = np.array(rows, int)
    return [s[:, k] == 1 for k in range(s.shape[1])]


def models(f):
    imp = lambda: SimpleImputer(strategy="median")
    return {
        "Ridge": lambda: make_pipeline(imp(), StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13))),
        "KNN10": lambda: make_pipeline(imp(), StandardScaler(), KNeighborsRegressor(10)),
        "RF": lambda: make_pipeline(imp(), RandomForestRegressor(300, random_state=0)),
        "HGB": lambda: HistGradientBoostingRegressor(random_state=0),
        "GP": lambda: make_pipeline(imp(), StandardScaler(), GaussianProcessRegressor(
            C(1.0) * RBF(np.ones(f)) + WhiteKernel(), normalize_y=True, random_state=0)),
        "XGB": lambda: make_pipeline(imp(), XGBRegressor(n_estimators=500, random_state=0)),
    }


def interval_score(y, lo, hi, alpha=ALPHA):
    """Gneiting–Raftery interval score of the central (1−alpha) interval, mean over rows."""
    s = (hi - lo) + (2 / alpha) * (lo - y) * (y < lo) + (2 / alpha) * (y - hi) * (y > hi)
    return float(np.mean(s))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="dataset folder laid out like shared/data")
    ap.add_argument("--folds", choices=["blocks", "random"], default="blocks")
    ap.add_argument("--only", default="", help="comma-separated dataset names (default: all)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    only = set(filter(None, args.only.split(",")))
    out = {
        "folds": {"blocks": "five contiguous fifths in file (time) order, numpy.array_split",
                  "random": "the fixed splits in splits/<name>.csv"}[args.folds],
        "script": "scripts/baselines.sh --folds " + args.folds,
        "versions": {"sklearn": __import__("sklearn").__version__,
                     "xgboost": __import__("xgboost").__version__,
                     "numpy": np.__version__},
        "datasets": {}, "suite_mean_r2": {}, "data_sha256": {},
        "intervals_80": {
            "method": "HistGradientBoosting (loss=quantile, random_state=0) at 0.1 and 0.9, same folds; "
                      "coverage80 = share of test rows inside [q0.1, q0.9]; interval_score = Gneiting-Raftery, "
                      "alpha=0.2; each the mean over the folds",
            "datasets": {}},
    }
    for name, file, X, y in load(args.data):
        if only and name not in only:
            continue
        with open(os.path.join(args.data, file), "rb") as fh:
            out["data_sha256"][name] = hashlib.sha256(fh.read()).hexdigest()
        masks = folds(args.data, file, len(y), args.folds)
        per = {}
        for mname, make in models(X.shape[1]).items():
            r2s, rmses = [], []
            for te in masks:
                Xt, yt = X[~te], y[~te]
                if mname == "GP" and len(yt) > GP_MAX_ROWS:
                    keep = np.random.RandomState(0).choice(len(yt), GP_MAX_ROWS, replace=False)
                    Xt, yt = Xt[keep], yt[keep]
                m = make()
                m.fit(Xt, yt)
                p = m.predict(X[te])
                r2s.append(float(r2_score(y[te], p)))
                rmses.append(float(math.sqrt(mean_squared_error(y[te], p))))
            per[mname] = {"r2": round(float(np.mean(r2s)), 5), "rmse": round(float(np.mean(rmses)), 5),
                          "fold_r2": [round(v, 5) for v in r2s]}
            print(f"{name} {mname} {per[mname]['r2']:.4f}", file=sys.stderr)
        out["datasets"][name] = per
        cov, wid, isc = [], [], []
        for te in masks:
            q = {}
            for a in (0.1, 0.9):
                m = HistGradientBoostingRegressor(loss="quantile", quantile=a, random_state=0)
                m.fit(X[~te], y[~te])
                q[a] = m.predict(X[te])
            lo, hi, yt = q[0.1], q[0.9], y[te]
            cov.append(float(np.mean((yt >= lo) & (yt <= hi))))
            wid.append(float(np.mean(hi - lo)))
            isc.append(interval_score(yt, lo, hi))
        out["intervals_80"]["datasets"][name] = {
            "coverage80": round(float(np.mean(cov)), 4), "mean_width": round(float(np.mean(wid)), 6),
            "interval_score": round(float(np.mean(isc)), 6), "fold_coverage80": [round(v, 4) for v in cov]}
    names = list(out["datasets"])
    for mname in models(1):
        out["suite_mean_r2"][mname] = round(float(np.mean([out["datasets"][d][mname]["r2"] for d in names])), 5)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
