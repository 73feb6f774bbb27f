#!/usr/bin/env node
// The bin npm links for `npm create fabric-handler`; the CLI itself is built into dist.
import "../dist/cli.js";
