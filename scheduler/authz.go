package scheduler

import "net/http"

// Authorize wraps h in the admin API's access rule, for handlers mounted
// beside it (the status page): with AuthTokens set, every request needs
// Authorization: Bearer <token>; without them the listener is loopback
// only, which the command that serves it enforces.
func (s *Scheduler) Authorize(h http.Handler) http.Handler { return s.auth(h.ServeHTTP) }
