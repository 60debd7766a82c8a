"""Decision quality on labelled cases: the pieces behind `python -m scripts.evaluate`.

One job per module: `cases` (reading and checking the labelled file), `targets` (where decisions are sent),
`collect` (sending every case, as given and reversed), `metrics` (the figures), `calibration_fit` (the
temperature and slot-bias fit and its document), `report` (text, JSON, reliability diagram).
"""
