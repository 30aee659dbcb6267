package main

import (
	"os"
	"testing"

	"github.com/regressd/regressd/tsdb/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
