-- Keys and usage of the hosted prediction API (POST /predict).
--
-- A key is "rgd_<lookup_id>_<secret>". Only its SHA-256 is stored; lookup_id
-- finds the row and the hash is compared in constant time. The plaintext is
-- shown once, by `regressd keys create`.
CREATE TABLE IF NOT EXISTS regressd_gateway_keys (
    id          bigserial   PRIMARY KEY,
    name        text        NOT NULL,
    lookup_id   text        NOT NULL UNIQUE,
    key_hash    bytea       NOT NULL,
    created     timestamptz NOT NULL DEFAULT now(),
    revoked     timestamptz,
    last_used   timestamptz,
    CHECK (name <> ''),
    CHECK (octet_length(key_hash) = 32)
);

-- A name identifies one live key; a revoked key's name may be reused.
CREATE UNIQUE INDEX IF NOT EXISTS regressd_gateway_keys_live_name_idx
    ON regressd_gateway_keys (name) WHERE revoked IS NULL;

-- Usage per key, UTC day and model. requests counts answered predictions
-- (200); errors counts authenticated requests refused or failed. Tokens
-- follow the hosted API: input = non-null values in X_train, y_train and
-- X_test; output = predictions.
CREATE TABLE IF NOT EXISTS regressd_gateway_usage (
    key_id        bigint  NOT NULL REFERENCES regressd_gateway_keys (id) ON DELETE CASCADE,
    day           date    NOT NULL,
    model         text    NOT NULL,
    requests      bigint  NOT NULL DEFAULT 0,
    errors        bigint  NOT NULL DEFAULT 0,
    context_rows  bigint  NOT NULL DEFAULT 0,
    query_rows    bigint  NOT NULL DEFAULT 0,
    input_tokens  bigint  NOT NULL DEFAULT 0,
    output_tokens bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (key_id, day, model)
);
