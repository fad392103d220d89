"""The corpora: one module per source, one case schema, one registry.

    cases          the case schema (`Case`, cases.parquet) and its one reader
    entries        each kind's params entry without its builder: typed settings, checks, the names a build gives
    settings       the corpora settings: every entry of params `corpora` (and the command line), through entries
    registry       corpus kind -> (settings type, builder); the stage builds every configured corpus through it
    humanevalpack  HEvalFix-<Lang> from HumanEvalPack (framings body/decl/prompt)
    probeedit      ProbeEdit-S from the pinned standard-library archive (analysis/data/probeedit_stdlib.tar.gz)
    commits        CommitEdits-<name> mined from git history (git: the read-only git plumbing it uses)
    pairs          a user's edit-pairs file (JSON Lines or Parquet)
    hfdataset      any dataset the `datasets` library reads, from the hub or a local file
    jsonl          the JSON Lines reader the file-based sources share
    sample         the one seeded sampler of case ids

This package's __init__ imports nothing, so a stage that reads cases depends on the case schema
only, not on every builder; one that names a corpus or a framing depends on `entries`, not on a builder.
"""
