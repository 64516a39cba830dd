package config

import (
	"io"
	"log/slog"
)

// Log levels and formats of the log section.
const (
	LogDebug = "debug"
	LogInfo  = "info"
	LogWarn  = "warn"
	LogError = "error"

	LogText = "text" // slog's key=value lines
	LogJSON = "json" // one JSON object a line

	DefaultLogLevel    = LogInfo // log.level
	DefaultLogFormat   = LogText // log.format
	DefaultLogRequests = true    // log.requests
)

// Log configures the process's log.
type Log struct {
	// Level is the least severe level written: debug, info, warn or error.
	Level string
	// Format is text or json.
	Format string
	// Requests, when false, writes the line each HTTP request logs at debug
	// instead of info, so that a busy server's log holds what matters (a
	// request that failed with a 5xx is still an error). Default true.
	Requests bool
}

// SlogLevel is Level as a slog.Level; info for an unknown level (Validate
// refuses those).
func (l Log) SlogLevel() slog.Level {
	switch l.Level {
	case LogDebug:
		return slog.LevelDebug
	case LogWarn:
		return slog.LevelWarn
	case LogError:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// RequestLevel is the level of the line each HTTP request logs.
func (l Log) RequestLevel() slog.Level {
	if l.Requests {
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// Logger returns a logger writing to w in Format, from Level up.
func (l Log) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: l.SlogLevel()}
	if l.Format == LogJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func (v *validator) log(l *Log) {
	switch l.Level {
	case LogDebug, LogInfo, LogWarn, LogError:
	default:
		v.fail("log.level", "%q: want debug, info, warn or error", l.Level)
	}
	switch l.Format {
	case LogText, LogJSON:
	default:
		v.fail("log.format", "%q: want text or json", l.Format)
	}
}
