package tsdb

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// InputError is PostgreSQL refusing what a task asked of it, not failing:
// SQLSTATE class 22 (data exception: invalid bytes, a value out of range)
// or 42 (syntax error or access rule violation: a missing column, a
// permission). The same statement fails the same way every time, so it is
// never retried: the task fails with Message.
type InputError struct {
	Code    string
	Message string
}

func (e *InputError) Error() string { return e.Message }

// AsInputError returns err's InputError when err is one (see InputError).
func AsInputError(err error) (*InputError, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) < 2 {
		return nil, false
	}
	switch pgErr.Code[:2] {
	case "22", "42":
		msg := pgErr.Message
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return &InputError{Code: pgErr.Code, Message: fmt.Sprintf("the database refused the task's input: %s (SQLSTATE %s); fix the trigger's arguments or the request, retrying cannot help", msg, pgErr.Code)}, true
	}
	return nil, false
}
