package metrics

// Metric names, as served on /metrics and listed in ops/METRICS.md.
const (
	NameTaskDuration  = "regressd_task_duration_seconds"
	NameStageDuration = "regressd_stage_duration_seconds"
	NameTasks         = "regressd_tasks_total"

	NameRowsRead            = "regressd_rows_read_total"
	NameRowsPredicted       = "regressd_rows_predicted_total"
	NameRowsWritten         = "regressd_rows_written_total"
	NameRowsSkippedExisting = "regressd_rows_skipped_existing_total"

	NameGatewayCalls   = "regressd_gateway_calls_total"
	NameGatewayRetries = "regressd_gateway_retries_total"
	NameDeadLetters    = "regressd_dead_letters_total"
	NameGatewayRefused = "regressd_gateway_refused_total"

	NameBreakerState    = "regressd_breaker_state"
	NameEngineInflight  = "regressd_engine_inflight_calls"
	NameEngineRung      = "regressd_engine_kv_cache_rung"
	NameEngineRungCalls = "regressd_engine_calls_total"
	NameHTTPRequests    = "regressd_http_requests_total"
	NameHTTPDuration    = "regressd_http_request_duration_seconds"
	NameScheduleTicks   = "regressd_schedule_ticks_total"
	NameScheduleSkipped = "regressd_schedule_ticks_skipped_total"
	NameScheduleSuccess = "regressd_schedule_last_success_timestamp_seconds"
	NameSchedulePeriod  = "regressd_schedule_period_seconds"
	NameConsumerPending = "regressd_consumer_pending_messages"
	NameConsumerAcks    = "regressd_consumer_ack_pending_messages"
	NameConsumerRedeliv = "regressd_consumer_redelivered_messages"
	NameStreamMessages  = "regressd_stream_messages"
	NameJetStreamErrors = "regressd_jetstream_info_errors_total"
	NameNATSInBytes     = "regressd_nats_in_bytes_total"
	NameNATSOutBytes    = "regressd_nats_out_bytes_total"
	NameNATSReconnects  = "regressd_nats_reconnects_total"
	NameNATSConnected   = "regressd_nats_connected"
	NameDBConns         = "regressd_db_conns"
	NameDBAcquiredConns = "regressd_db_acquired_conns"
	NameDBAcquireWaits  = "regressd_db_acquire_waits_total"
)
