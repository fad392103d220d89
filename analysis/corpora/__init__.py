"""The corpora: one module per source, one case schema, one registry.

    cases          the case schema (`Case`, cases.parquet) and its one reader
    registry       corpus kind -> (settings type, builder); the stage builds every configured corpus through it
    humanevalpack  HEvalFix-<Lang> from HumanEvalPack (framings body/decl/prompt)
    probeedit      ProbeEdit-S from the pinned standard-library archive (analysis/data/probeedit_stdlib.tar.gz)
    commits        CommitEdits-<name> mined from git history
    pairs          a user's edit-pairs file (JSON Lines or Parquet)
    jsonl          the JSON Lines reader the file-based sources share

This package's __init__ imports nothing, so a stage that reads cases depends on the case schema
only, not on every builder.
"""
