package scheduler

// maxEcho is the most of a caller's input an answer or a log line repeats.
const maxEcho = 200

// maxMessage is the longest error message an answer carries: every
// problem of a request is named, each with its input cut to maxEcho.
const maxMessage = 8 << 10
