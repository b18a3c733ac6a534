-- :MemoryHealth against the real server (tests/e2e/test_neovim_health.py runs it, in a copy of
-- examples/demo with notes that repeat older ones and a note past its `expires:` date).
--
--   MEMORY_LS_CMD=/path/to/memory-ls MEMORY_LS_TEST_OUT=/tmp/out.json \
--     nvim --headless --clean -c "luafile editors/neovim/tests/findings.lua"   (cwd: the workspace)
--
-- Only MEMORY.md is opened: the findings of the other files come from publishDiagnostics for
-- files no window shows. Recorded beside the checks: the quickfix list :MemoryHealth made.
local h = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/harness.lua")
local results, record, check = h.results, h.record, h.check

-- $MEMORY_LS_TEST_UNOPENED: a file with a finding that nothing opens (workspace-relative).
local unopened = os.getenv("MEMORY_LS_TEST_UNOPENED")
-- How many findings the workspace holds: :MemoryHealth is run once the clients have them all.
local expected = tonumber(os.getenv("MEMORY_LS_TEST_FINDINGS") or "1")

h.run(function()
  local mls = require("memory_ls")
  mls.setup({ cmd = { h.server, "serve" }, settings = { provider = "none" }, picker = "none" })
  local findings = require("memory_ls.findings")

  check("no server: :MemoryHealth says so", function()
    local before = #h.notes
    local items = mls.health()
    local said = table.concat(vim.list_slice(h.notes, before + 1), "\n")
    record("no server: :MemoryHealth says so", #items == 0 and said:find("no memory%-ls server is running") ~= nil, said)
  end)

  local client = h.attach()
  if not client then
    return
  end

  check("findings of unopened files are kept", function()
    local function count()
      local n = 0
      for _, d in ipairs(findings.diagnostics(mls.NAME)) do
        n = n + (findings.is_finding(d) and 1 or 0)
      end
      return n
    end
    h.wait(90000, function()
      return count() >= expected
    end, expected .. " findings published")
    local buf = vim.fn.bufnr(h.root .. "/" .. unopened)
    results.unopened = { bufnr = buf, loaded = buf > 0 and vim.api.nvim_buf_is_loaded(buf) }
    record("findings of unopened files are kept", buf > 0 and not results.unopened.loaded,
      unopened .. ": buffer " .. buf .. (results.unopened.loaded and " is loaded" or ""))
  end)

  check("a broken citation in the open buffer", function()
    -- A memory-ls diagnostic, but of this document: :MemoryHealth leaves it to the buffer.
    local buf = vim.api.nvim_get_current_buf()
    vim.api.nvim_buf_set_lines(buf, -1, -1, false, { "- Old decision: memory/2025-12-01-gone.md#L1-L3" })
    h.wait(30000, function()
      for _, d in ipairs(vim.diagnostic.get(buf)) do
        if d.source == "memory-ls" and d.code == "citation" then
          return true
        end
      end
      return false
    end, "the citation diagnostic")
    record("a broken citation in the open buffer", true)
  end)

  check(":MemoryHealth", function()
    vim.cmd("MemoryHealth")
    local qf = vim.fn.getqflist({ title = 1, items = 1, winid = 1 })
    local items = {}
    for _, it in ipairs(qf.items) do
      table.insert(items, {
        file = vim.fn.fnamemodify(vim.api.nvim_buf_get_name(it.bufnr), ":."),
        lnum = it.lnum,
        type = it.type,
        text = it.text,
        code = type(it.user_data) == "table" and it.user_data.code or vim.NIL,
      })
    end
    results.qf = { title = qf.title, items = items, open = qf.winid ~= 0 }
    record(":MemoryHealth", qf.winid ~= 0 and #items > 0, qf.title)
  end)

  check("the first entry opens its file at its line", function()
    vim.cmd("cfirst")
    local name = vim.fn.fnamemodify(vim.api.nvim_buf_get_name(0), ":.")
    results.first = { file = name, line = vim.api.nvim_win_get_cursor(0)[1] }
    record("the first entry opens its file at its line", true)
  end)
end)
