-- Headless end-to-end test of the plugin against a real `memory-ls serve`.
--
--   MEMORY_LS_CMD=/path/to/memory-ls MEMORY_LS_TEST_OUT=/tmp/out.json \
--     nvim --headless --clean -c "luafile editors/neovim/tests/headless.lua"   (cwd: a copy of examples/demo)
--
-- Every check is recorded as {name, ok, detail} in the JSON file; tests/e2e/test_neovim.py reads it.
-- Nvim quits at the end whatever happens.
local h = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/harness.lua")
local server, root, results = h.server, h.root, h.results
local record, check, wait, notes = h.record, h.check, h.wait, h.notes
results.nvim = tostring(vim.version())

-- Messages and pickers are recorded by the harness; prompts too.
local prompts = {}
vim.ui.input = function(o, on_confirm)
  table.insert(prompts, o.prompt)
  on_confirm("token bucket")
end

local progress = {}
vim.api.nvim_create_autocmd("LspProgress", {
  callback = function(ev)
    local c = vim.lsp.get_client_by_id(ev.data.client_id)
    if c and c.name == "memory_ls" then
      table.insert(progress, ev.data.params.value.kind)
    end
  end,
})

if os.getenv("MEMORY_LS_TEST_LEGACY") == "1" then
  vim.g.memory_ls_no_lsp_config = true -- the Neovim 0.10 way: FileType + vim.lsp.start
end

h.run(function()
  local mls = require("memory_ls")
  mls.setup({
    cmd = { server, "serve" },
    settings = { provider = "none" },
    picker = "select",
  })
  results.registration = mls.registration

  check("util", function()
    local util = require("memory_ls.util")
    local line = "Background: memory/2026-01-10-api-design.md#L5-L9 and ./memory/people.md#L3."
    local c = util.citation_at(line, 20)
    local c2 = util.citation_at(line, #line - 5)
    local hit = { uri = "file:///ws/memory/a.md", path = "memory/a.md", source = "memory", startLine = 10, endLine = 14, bestLine = 12,
      snippet = "# Title\nalpha\nbeta gamma\ngamma\n" }
    local old_server = vim.deepcopy(hit) -- a server from before bestLine
    old_server.bestLine = nil
    local transcript = vim.tbl_extend("force", hit, { path = "s/a.jsonl", source = "sessions" })
    local qf = util.to_qf_items({ results = { hit, old_server } }, "beta")
    local cases = {
      { c and c.citation, "memory/2026-01-10-api-design.md#L5-L9" },
      { c and c.start, 5 },
      { c and c["end"], 9 },
      { c2 and c2.citation, "memory/people.md#L3" },
      { c2 and c2["end"], 3 },
      { util.citation_at(line, 3), nil },
      { util.find_root(root .. "/memory/people.md"), root },
      { util.find_root(root), root },
      { util.best_line(hit), 12 },
      { util.no_results_message("orchid", { results = {}, belowMinScore = { count = 3, bestScore = 0.031 } }),
        "no results for orchid (3 below minScore, best 0.03: rephrase or lower query.minScore)" },
      { util.no_results_message("orchid", { results = {} }), "no results for orchid" },
      { util.best_line(old_server), 10 },
      { util.best_line(vim.tbl_extend("force", hit, { bestLine = 20 })), 10 },
      { util.snippet_offset(hit), 2 },
      { util.snippet_offset(transcript), 0 },
      { qf[1].lnum, 12 },
      { qf[1].text, "0.00 beta gamma" },
      { qf[2].lnum, 10 },
      { qf[2].text, "0.00 Title" },
      { util.headline(hit.snippet), "Title" },
      { util.citation_insertion("x.md#L1", "e"), " x.md#L1" },
      { util.citation_insertion("x.md#L1", "("), "x.md#L1" },
      { util.sync_summary({ folders = { { folder = "f", report = { files = 2, indexed = 1, unchanged = 1, removed = 0,
        embedded = 0, durationMs = 12 } } } }), "synced 2 files: 1 indexed, 1 unchanged, 0 removed, 0 chunks embedded in 0.01 s" },
      { util.sync_summary({ folders = { { folder = "file:///w/good", report = { files = 2, indexed = 1, unchanged = 1,
        removed = 0, embedded = 0, durationMs = 12 } }, { folder = "file:///w/my%20notes", report = vim.NIL,
        error = "sync failed: disk full" } } }),
        "synced 2 files: 1 indexed, 1 unchanged, 0 removed, 0 chunks embedded in 0.01 s; not synced: my notes: sync failed: disk full" },
      { util.sync_summary({ folders = { { folder = "file:///w/x", report = vim.NIL, error = "no index" } } }),
        "not synced: x: no index" },
    }
    local bad = {}
    for i, case in ipairs(cases) do
      if case[1] ~= case[2] then
        table.insert(bad, string.format("case %d: got %s, want %s", i, vim.inspect(case[1]), vim.inspect(case[2])))
      end
    end
    record("util", #bad == 0, table.concat(bad, "; "))
  end)

  check("picker adapters", function()
    -- Stand-ins with the real plugins' entry points: which one "auto" picks, and that a choice
    -- comes back to the hit. (The real Telescope / fzf-lua / snacks are not installed here.)
    local pickers = require("memory_ls.pickers")
    local items = { { filename = root .. "/memory/people.md", lnum = 3, end_lnum = 5, text = "0.90 Ana",
      user_data = { memory_ls = { path = "memory/people.md", citation = "memory/people.md#L3-L5" } } } }
    local got = {}
    local detected = { pickers.detect() }
    package.loaded["fzf-lua"] = {
      fzf_exec = function(entries, o)
        got.fzf_entry = entries[1]
        o.actions["default"]({ entries[1] }, o)
      end,
    }
    table.insert(detected, pickers.detect())
    pickers.pick("auto", items, { title = "t", on_choice = function(it) got.fzf = it end })
    package.loaded["fzf-lua"] = nil
    _G.Snacks = { picker = { pick = function(o)
      got.snacks_item = o.items[1]
      o.confirm({ close = function() end }, o.items[1])
    end } }
    table.insert(detected, pickers.detect())
    pickers.pick("auto", items, { title = "t", on_choice = function(it) got.snacks = it end })
    _G.Snacks = nil
    local ok = detected[1] == "select" and detected[2] == "fzf-lua" and detected[3] == "snacks"
      and got.fzf == items[1] and got.snacks == items[1]
      and got.fzf_entry == root .. "/memory/people.md:3:1: 0.90 Ana"
      and got.snacks_item.file == items[1].filename and got.snacks_item.pos[1] == 3
    record("picker adapters", ok, vim.inspect({ detected = detected, fzf_entry = got.fzf_entry }))
  end)

  check("picker previews of local hits", function()
    -- Without a teammate's file in the list, each picker gets its own previewer, as before the
    -- team previews, which shows each file from the disk at the hit's line.
    local fake = dofile(h.dir .. "/fake_pickers.lua")
    local items = {}
    for _, hit in ipairs({ { "memory/people.md", 3 }, { "memory/2026-01-10-api-design.md", 6 } }) do
      table.insert(items, { filename = root .. "/" .. hit[1], lnum = hit[2], text = "0.50 x",
        user_data = { memory_ls = { path = hit[1] } } })
    end
    local bad = {}
    for _, kind in ipairs(fake.KINDS) do
      local run = fake.run(kind, items)
      if run.previewer ~= run.stock or (kind == "telescope" and rawget(run.previewer, "preview") ~= nil) then
        table.insert(bad, kind .. " got the previewer " .. vim.inspect(run.previewer))
      end
      for i, item in ipairs(items) do
        local s = run.shown[i] or {}
        if not vim.deep_equal(s.lines, vim.fn.readfile(item.filename)) or s.line ~= item.lnum then
          table.insert(bad, string.format("%s showed for item %d: %s", kind, i, vim.inspect(s)))
        end
      end
    end
    record("picker previews of local hits", #bad == 0, table.concat(bad, "; "))
  end)

  local client = h.attach(function()
    record("filetype markdown", vim.bo.filetype == "markdown", vim.bo.filetype)
  end)
  if not client then
    return
  end

  check("progress", function()
    wait(60000, function()
      return vim.tbl_contains(progress, "end")
    end, "the startup sync's progress to end")
    record("progress", progress[1] == "begin", table.concat(progress, ","))
  end)

  check("search fills the quickfix list", function()
    vim.cmd("MemorySearch token bucket")
    wait(15000, function()
      return #vim.fn.getqflist() > 0
    end, "quickfix items")
    local qf = vim.fn.getqflist({ title = 1, items = 1 })
    local first = qf.items[1]
    local name = vim.api.nvim_buf_get_name(first.bufnr)
    local hit = first.user_data.memory_ls -- the server's bestLine and matchedTerms
    record("search fills the quickfix list",
      name == root .. "/memory/2026-01-10-api-design.md" and first.lnum == 6 and hit.bestLine == 6
        and table.concat(hit.matchedTerms, " ") == "token bucket" and qf.title:find("Memory: token bucket", 1, true) ~= nil,
      string.format("%s:%d %q %s", name, first.lnum, qf.title, vim.inspect(hit.matchedTerms)))
    -- vim.ui.select (stubbed: first item) opened the hit at its line.
    wait(5000, function()
      return vim.api.nvim_buf_get_name(0):match("2026%-01%-10%-api%-design%.md$") ~= nil
    end, "the picker to open the hit")
    record("picker opens the hit at its line", vim.api.nvim_win_get_cursor(0)[1] == 6,
      vim.api.nvim_buf_get_name(0) .. ":" .. vim.api.nvim_win_get_cursor(0)[1])
  end)

  check("search prompts when the query is empty", function()
    vim.fn.setqflist({}, "r")
    vim.cmd("MemorySearch")
    wait(15000, function()
      return #vim.fn.getqflist() > 0
    end, "quickfix items")
    record("search prompts when the query is empty", prompts[1] == "Memory search: " and vim.fn.getqflist()[1].lnum == 6,
      vim.inspect(prompts))
  end)

  check("gd on a citation", function()
    vim.cmd("edit " .. root .. "/MEMORY.md")
    local line = vim.api.nvim_buf_get_lines(0, 7, 8, false)[1]
    local col = line:find("memory/2026", 1, true)
    vim.api.nvim_win_set_cursor(0, { 8, col + 3 })
    vim.cmd("normal gd")
    wait(10000, function()
      return vim.api.nvim_buf_get_name(0):match("2026%-01%-10%-api%-design%.md$") ~= nil
    end, "gd to open the cited file")
    wait(2000, function()
      return vim.api.nvim_win_get_cursor(0)[1] == 5
    end, "the cursor on line 5")
    record("gd on a citation", vim.api.nvim_win_get_cursor(0)[1] == 5, vim.api.nvim_buf_get_name(0))
  end)

  check("K on a citation", function()
    vim.cmd("edit " .. root .. "/memory/2026-02-03-incident.md")
    wait(10000, function()
      return #vim.lsp.get_clients({ name = "memory_ls", bufnr = 0 }) > 0
    end, "attach to the incident note")
    local line = vim.api.nvim_buf_get_lines(0, 10, 11, false)[1]
    local col = line:find("memory/2026", 1, true)
    vim.api.nvim_win_set_cursor(0, { 11, col + 3 })
    vim.cmd("normal K")
    local text = ""
    wait(10000, function()
      for _, w in ipairs(vim.api.nvim_list_wins()) do
        if vim.api.nvim_win_get_config(w).relative ~= "" then
          text = table.concat(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false), "\n")
          return text:find("token bucket", 1, true) ~= nil
        end
      end
      return false
    end, "a hover window with the cited lines")
    record("K on a citation", text:find("Rate limiting", 1, true) ~= nil, text:sub(1, 200))
    for _, w in ipairs(vim.api.nvim_list_wins()) do
      if vim.api.nvim_win_get_config(w).relative ~= "" then
        vim.api.nvim_win_close(w, true)
      end
    end
  end)

  check("unsaved edit is searchable", function()
    local file = root .. "/memory/people.md"
    local before = table.concat(vim.fn.readfile(file), "\n")
    vim.cmd("edit " .. file)
    wait(10000, function()
      return #vim.lsp.get_clients({ name = "memory_ls", bufnr = 0 }) > 0
    end, "attach to people.md")
    vim.api.nvim_buf_set_lines(0, -1, -1, false, { "- Zoltan: quartermaster of the purple llama fleet." })
    local found
    local deadline = vim.uv.now() + 20000
    while not found and vim.uv.now() < deadline do
      vim.fn.setqflist({}, "r")
      vim.cmd("MemorySearch purple llama quartermaster")
      vim.wait(3000, function()
        return #vim.fn.getqflist() > 0 or vim.tbl_contains(notes, "memory-ls: no results for purple llama quartermaster")
      end, 20)
      for _, it in ipairs(vim.fn.getqflist()) do
        if vim.api.nvim_buf_get_name(it.bufnr) == file then
          found = it
        end
      end
      if not found then
        vim.wait(300)
      end
    end
    local after = table.concat(vim.fn.readfile(file), "\n")
    record("unsaved edit is searchable", found ~= nil and found.lnum == 6 and before == after and vim.bo.modified,
      found and ("line " .. found.lnum) or "not found")
    vim.cmd("edit " .. root .. "/MEMORY.md")
  end)

  check("MemoryGet", function()
    vim.cmd("MemoryGet memory/2026-01-10-api-design.md#L5-L9")
    wait(10000, function()
      return vim.api.nvim_buf_get_name(0):match("^memory://") ~= nil
    end, "the scratch buffer")
    local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
    record("MemoryGet", lines[1] == "## Rate limiting" and #lines == 5 and vim.bo.filetype == "markdown",
      vim.api.nvim_buf_get_name(0) .. " " .. vim.inspect(lines))
    vim.cmd("close")
  end)

  check("MemoryInsertCitation", function()
    vim.cmd("enew")
    vim.bo.filetype = "markdown"
    vim.api.nvim_buf_set_lines(0, 0, -1, false, { "See" })
    vim.api.nvim_win_set_cursor(0, { 1, 2 })
    local buf = vim.api.nvim_get_current_buf()
    vim.cmd("MemoryInsertCitation sliding window log")
    local line
    wait(10000, function()
      line = vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1]
      return line ~= "See"
    end, "the citation to be inserted")
    record("MemoryInsertCitation", line:match("^See memory/2026%-01%-10%-api%-design%.md#L%d+%-L%d+$") ~= nil, line)
    vim.bo[buf].modified = false
  end)

  check("MemoryStatus", function()
    vim.cmd("MemoryStatus")
    wait(10000, function()
      return vim.api.nvim_buf_get_name(0) == "memory://status"
    end, "the status buffer")
    local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
    record("MemoryStatus", text:find("# Memory status", 1, true) ~= nil and text:find("Search mode%s+keyword%-only") ~= nil
      and text:find("Files%s+5") ~= nil, text:sub(1, 400))
    vim.cmd("close")
  end)

  check("MemoryReindex!", function()
    vim.cmd("MemoryReindex!")
    local msg
    wait(30000, function()
      for _, n in ipairs(notes) do
        if n:match("^memory%-ls: rebuilt") or n:match("^memory%-ls: synced") then
          msg = n
          return true
        end
      end
      return false
    end, "the reindex summary")
    record("MemoryReindex!", msg:match("5 files") ~= nil, msg)
  end)

  check("statusline", function()
    vim.cmd("edit " .. root .. "/MEMORY.md")
    local s
    wait(10000, function()
      s = mls.statusline()
      return s == "memory: keyword-only"
    end, "the statusline mode")
    record("statusline", true, s)
  end)

  check("checkhealth", function()
    vim.cmd("checkhealth memory_ls")
    local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
    local text = table.concat(lines, "\n")
    results.health = text
    record("checkhealth", text:find("ERROR", 1, true) == nil and text:find("OK server version: memory%-ls") ~= nil
      and text:find("index mode keyword%-only") ~= nil, text)
  end)
end)
