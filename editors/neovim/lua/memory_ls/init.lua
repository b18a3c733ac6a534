-- memory-ls for Neovim: registers the language server and adds :MemorySearch, :MemoryGet,
-- :MemoryReindex, :MemoryStatus, :MemoryInsertCitation and :MemoryHealth. Works with no other plugin;
-- Telescope, fzf-lua or snacks.nvim pickers are used when installed.
local util = require("memory_ls.util")

local M = {}

M.NAME = "memory_ls"
-- The URI scheme of a file only a teammate has (a team index hit): the file: URI it would have
-- here with this scheme instead; memory/get reads it from the team index.
M.TEAM_SCHEME = "memory-ls"

---@class memory_ls.Options
M.defaults = {
  -- The server command (a list). Default: `memory-ls serve` from PATH.
  cmd = { "memory-ls", "serve" },
  -- Extra environment for the server process.
  cmd_env = nil,
  -- Filetypes the server attaches to (citations work in any of them; only memory files are
  -- indexed). "jsonl" is added when settings.sources includes "sessions".
  filetypes = { "markdown" },
  -- Root detection: groups of markers tried in order (nearest folder with any marker of the
  -- first group, else of the next group).
  root_markers = { { "MEMORY.md", "memory.md", "memory" }, { ".git" } },
  -- Server settings, camelCase and nested as in .memory-ls.toml, e.g.
  -- { provider = "none", query = { maxResults = 10 } }. Sent as initializationOptions and
  -- answered for workspace/configuration (section "memory").
  settings = {},
  -- Buffer-local maps set on attach; false disables one (or all with keymaps = false).
  keymaps = { definition = "gd", hover = "K" },
  -- "auto" (telescope, fzf-lua, snacks, else vim.ui.select), "telescope", "fzf-lua", "snacks",
  -- "select", "quickfix" (open the quickfix window), "none", or function(items, opts).
  picker = "auto",
  -- Results per :MemorySearch (nil: the server's query.maxResults).
  max_results = nil,
  -- vim.notify when an indexing run ends.
  notify_progress = false,
  -- Start the server for matching buffers automatically.
  autostart = true,
  -- Passed to the client config.
  on_attach = nil,
  capabilities = nil,
}

-- Every plugin option, those whose default is nil too (they are no keys of M.defaults): any other
-- key given to setup() is a server setting.
local PLUGIN_KEYS = { cmd_env = true, max_results = true, on_attach = true, capabilities = true }
for k in pairs(M.defaults) do
  PLUGIN_KEYS[k] = true
end

M.config = vim.deepcopy(M.defaults)
M.did_setup = false

-- Per client id: last known status (mode, provider...), active progress by token.
local state = { status = {}, progress = {}, last_results = {} }
M._state = state

local function notify(msg, level)
  vim.notify("memory-ls: " .. msg, level or vim.log.levels.INFO)
end

local has_011 = vim.fn.has("nvim-0.11") == 1

-- Register through 0.11's vim.lsp.config/enable, else a FileType autocmd + vim.lsp.start
-- (0.10). `vim.g.memory_ls_no_lsp_config = true` forces the second way (tests use it).
local function use_lsp_config()
  return has_011 and vim.lsp.config ~= nil and not vim.g.memory_ls_no_lsp_config
end

local function request(client, method, params, handler, bufnr)
  if has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function request_sync(client, method, params, timeout_ms, bufnr)
  if has_011 then
    return client:request_sync(method, params, timeout_ms, bufnr)
  end
  return client.request_sync(method, params, timeout_ms, bufnr)
end
M._request_sync = request_sync

-- A Lua table that must go out as a JSON object even when empty.
local function as_object(t)
  if type(t) ~= "table" or next(t) == nil then
    return vim.empty_dict()
  end
  return t
end

local function server_settings()
  return as_object(M.config.settings)
end

local function filetypes()
  local fts = vim.deepcopy(M.config.filetypes)
  local sources = M.config.settings.sources
  if type(sources) == "table" and vim.tbl_contains(sources, "sessions") and not vim.tbl_contains(fts, "jsonl") then
    table.insert(fts, "jsonl")
  end
  return fts
end

--- The workspace root for a buffer (nil: do not attach).
function M.root_for_buf(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == "" or name:match("^%a[%w+.-]*://") then
    return nil
  end
  return util.find_root(name, M.config.root_markers)
end

local function on_attach(client, bufnr)
  local maps = M.config.keymaps
  if maps then
    if maps.definition then
      vim.keymap.set("n", maps.definition, vim.lsp.buf.definition,
        { buffer = bufnr, desc = "memory-ls: go to the cited lines" })
    end
    if maps.hover then
      vim.keymap.set("n", maps.hover, vim.lsp.buf.hover, { buffer = bufnr, desc = "memory-ls: preview the cited lines" })
    end
  end
  if M.config.on_attach then
    M.config.on_attach(client, bufnr)
  end
end

--- The client configuration (also what 0.11's vim.lsp.config receives).
function M.client_config()
  local cfg = {
    name = M.NAME,
    cmd = M.config.cmd,
    cmd_env = M.config.cmd_env,
    filetypes = filetypes(),
    settings = { memory = server_settings() },
    init_options = server_settings(),
    capabilities = M.config.capabilities,
    on_attach = on_attach,
  }
  return cfg
end

local function start_for_buf(bufnr)
  local root = M.root_for_buf(bufnr)
  if not root then
    return nil
  end
  local cfg = M.client_config()
  cfg.root_dir = root
  cfg.workspace_folders = { { uri = vim.uri_from_fname(root), name = vim.fs.basename(root) } }
  return vim.lsp.start(cfg, { bufnr = bufnr })
end

--- Start (or reuse) a client for `root` without attaching a buffer; returns the client id.
local function start_detached(root)
  local cfg = M.client_config()
  cfg.root_dir = root
  cfg.workspace_folders = { { uri = vim.uri_from_fname(root), name = vim.fs.basename(root) } }
  for _, c in ipairs(vim.lsp.get_clients({ name = M.NAME })) do
    local stopped = has_011 and c:is_stopped() or (not has_011 and c.is_stopped())
    if c.config.root_dir == root and not stopped then
      return c.id
    end
  end
  if has_011 then
    return vim.lsp.start(cfg, { attach = false })
  end
  return vim.lsp.start_client(cfg)
end

--- Where a teammate's file (its memory-ls:// URI) would be in this workspace, which tells its
--- workspace.
local function team_path(uri)
  return vim.fs.normalize(vim.uri_to_fname("file" .. uri:sub(#M.TEAM_SCHEME + 1)))
end

--- The file a buffer stands for: its own, or for a teammate's file (a memory-ls:// buffer) where
--- it would be in this workspace; nil for other URLs and no name.
local function buf_path(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if vim.startswith(name, M.TEAM_SCHEME .. "://") then
    return team_path(name)
  end
  if name == "" or name:match("^%a[%w+.-]*://") then
    return nil
  end
  return vim.fs.normalize(vim.fn.fnamemodify(name, ":p"))
end

--- The memory_ls client whose root holds `path`, else (unless `strict`) the only one running.
local function client_for_path(path, strict)
  local all = vim.lsp.get_clients({ name = M.NAME })
  for _, c in ipairs(all) do
    local root = c.config.root_dir
    if root and (path == root or path:sub(1, #root + 1) == root .. "/") then
      return c
    end
  end
  if #all == 1 and not strict then
    return all[1]
  end
  return nil
end

--- The memory_ls client for a buffer: attached to it, else the one of the memory workspace of the
--- buffer's file (or the cwd), else (a file in no memory workspace) the one whose root holds it,
--- else the only one running. nil when the file's memory workspace has none running yet.
function M.get_client(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local attached = vim.lsp.get_clients({ name = M.NAME, bufnr = bufnr })
  if attached[1] then
    return attached[1]
  end
  local path = buf_path(bufnr) or vim.fs.normalize(vim.fn.getcwd())
  -- A file of another memory workspace (a note, a source file beside it) is that workspace's
  -- business: not the only server running, which indexes another workspace.
  local own = util.find_root(path, { M.config.root_markers[1] })
  if own then
    for _, c in ipairs(vim.lsp.get_clients({ name = M.NAME })) do
      if c.config.root_dir == own then
        return c
      end
    end
    return nil
  end
  return client_for_path(path)
end

--- Attach the loaded buffers of `root` that have no memory_ls client and would get one on opening
--- (after their server exited, the next one serves them again: gd, K, unsaved edits).
local function attach_orphans(client_id, root)
  if not M.config.autostart then
    return
  end
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.tbl_contains(filetypes(), vim.bo[buf].filetype)
        and #vim.lsp.get_clients({ name = M.NAME, bufnr = buf }) == 0 and M.root_for_buf(buf) == root then
      vim.lsp.buf_attach_client(buf, client_id)
    end
  end
end

--- Call `cb(client)` with an initialized client, starting one for the buffer's (or cwd's)
--- workspace if needed.
function M.with_client(cb, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local client = M.get_client(bufnr)
  if not client then
    local path = buf_path(bufnr)
    local root = (path and util.find_root(path, M.config.root_markers)) or util.find_root(vim.fn.getcwd(), M.config.root_markers)
    if not root then
      notify("no memory workspace here (no MEMORY.md, memory.md, memory/ or .git above " .. vim.fn.getcwd() .. ")",
        vim.log.levels.WARN)
      return
    end
    local id = start_detached(root)
    client = id and vim.lsp.get_client_by_id(id)
    if not client then
      notify("could not start `" .. table.concat(M.config.cmd, " ") .. "`; see :checkhealth memory_ls",
        vim.log.levels.ERROR)
      return
    end
    attach_orphans(client.id, root)
  end
  local waited = 0
  local function go()
    if client.initialized then
      return cb(client)
    end
    if waited > 30000 or vim.lsp.get_client_by_id(client.id) == nil then
      notify("the server did not start; see :checkhealth memory_ls and :LspLog", vim.log.levels.ERROR)
      return
    end
    waited = waited + 50
    vim.defer_fn(go, 50)
  end
  go()
end

-- -- files of teammates (team index) ----------------------------------------------------------

-- Fills a buffer under :lockmarks, as reading a file does: quickfix entries and marks that
-- already point into the (empty) buffer keep their lines instead of moving down.
local function fill_keeping_marks(bufnr, lines)
  M._filling = { bufnr = bufnr, lines = lines }
  vim.cmd("lockmarks lua local f = require('memory_ls')._filling; "
    .. "vim.api.nvim_buf_set_lines(f.bufnr, 0, -1, false, f.lines)")
  M._filling = nil
end

local function now_ms()
  return (vim.uv or vim.loop).hrtime() / 1e6
end

--- The servers to ask for a teammate's file, in order: the one whose workspace holds it; else
--- every running one (a teammate's transcript under sessions.roots is in no workspace, and
--- only the servers know whose team index has it); else one started for the file's workspace.
local function team_clients(path)
  local home = client_for_path(path, true)
  if home then
    return { home }
  end
  local running = vim.lsp.get_clients({ name = M.NAME })
  if #running > 0 then
    return running
  end
  local root = util.find_root(path, M.config.root_markers)
  local id = root and start_detached(root)
  local started = id and vim.lsp.get_client_by_id(id)
  return started and { started } or {}
end

--- The text of a teammate's file (its memory-ls:// URI) from the team index, through memory/get:
--- its lines, or nil and why not. Synchronous (a BufReadCmd must have filled its buffer when it
--- returns): waits at most `timeout_ms` in all, for a server to start and for the answers
--- (opening waits long, a picker's preview briefly).
function M.team_file_lines(uri, timeout_ms)
  local deadline = now_ms() + timeout_ms
  local clients = team_clients(team_path(uri))
  if #clients == 0 then
    return nil, "no memory-ls server for its workspace"
  end
  local problems = {}
  local function note(problem)
    problem = tostring(problem)
    if not vim.tbl_contains(problems, problem) then
      table.insert(problems, problem)
    end
  end
  for _, client in ipairs(clients) do
    vim.wait(math.max(0, deadline - now_ms()), function()
      return client.initialized or vim.lsp.get_client_by_id(client.id) == nil
    end, 20)
    local left = math.floor(deadline - now_ms())
    if not (client.initialized and vim.lsp.get_client_by_id(client.id)) then
      note(left > 0 and "its server stopped" or string.format("no server ready within %g s", timeout_ms / 1000))
    elseif left <= 0 then
      note(string.format("no answer within %g s", timeout_ms / 1000))
    else
      local resp, err = request_sync(client, "memory/get", { path = uri }, left)
      if err == "timeout" then
        err = string.format("no answer within %g s", timeout_ms / 1000)
      end
      local problem = err or (resp == nil and "no answer") or (resp.err and (resp.err.message or vim.inspect(resp.err)))
      if not problem and type(resp.result) == "table" then
        return vim.split(resp.result.text or "", "\n", { plain = true })
      end
      note(problem or "no text")
    end
  end
  return nil, table.concat(problems, "; ")
end

--- BufReadCmd of a memory-ls:// buffer, a file only a teammate has (a team index hit, symbol or
--- citation): its text from the team index, read-only (there is no file here to write). Done
--- synchronously, so that an LSP jump's cursor move right after the load lands on a real line.
function M.read_team_file(bufnr)
  local uri = vim.api.nvim_buf_get_name(bufnr)
  local bo = vim.bo[bufnr]
  bo.swapfile = false
  bo.buftype = "nofile"
  local lines, problem = M.team_file_lines(uri, 10000)
  if not lines then
    notify("cannot read " .. uri .. " from the team index: " .. problem, vim.log.levels.ERROR)
    return
  end
  bo.readonly = false
  bo.modifiable = true
  fill_keeping_marks(bufnr, lines)
  bo.modifiable = false
  bo.readonly = true
  bo.modified = false
  local ft = vim.filetype.match({ filename = buf_path(bufnr) })
  if ft then
    bo.filetype = ft
  end
end

-- -- pickers and actions ------------------------------------------------------------------------

local function open_item(item)
  -- Like LSP jumps: works from a modified buffer whatever 'hidden' says, and keeps the jumplist.
  local buf = vim.fn.bufadd(item.filename)
  vim.bo[buf].buflisted = true
  vim.cmd("normal! m'")
  vim.api.nvim_win_set_buf(0, buf)
  pcall(vim.api.nvim_win_set_cursor, 0, { item.lnum, 0 })
  vim.cmd("normal! zv")
end
M._open_item = open_item

--- Insert `citation` after the cursor position `pos` ({row, col}) of `buf`.
local function insert_citation(buf, pos, citation)
  if not vim.api.nvim_buf_is_valid(buf) then
    vim.fn.setreg('"', citation)
    notify("the buffer is gone; the citation is in the unnamed register")
    return
  end
  local row, col = pos[1], pos[2]
  local line = vim.api.nvim_buf_get_lines(buf, row - 1, row, false)[1] or ""
  local at = 0
  local before = ""
  if #line > 0 then
    -- after the character under the cursor, like `a`
    local char_end = vim.str_utf_end and (col + vim.str_utf_end(line, col + 1) + 1) or (col + 1)
    at = math.min(#line, char_end)
    before = line:sub(at, at)
  end
  local text = util.citation_insertion(citation, before)
  vim.api.nvim_buf_set_text(buf, row - 1, at, row - 1, at, { text })
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    pcall(vim.api.nvim_win_set_cursor, win, { row, at + #text - 1 })
  end
end
M._insert_citation = insert_citation

--- Show `items` (quickfix items of a search) in the configured picker; `on_choice(item)`.
local function pick(items, title, on_choice, kind)
  if kind == nil then
    kind = M.config.picker
  end
  if type(kind) == "function" then
    return kind(items, { title = title, on_choice = on_choice })
  end
  return require("memory_ls.pickers").pick(kind, items, { title = title, on_choice = on_choice })
end

---@class memory_ls.SearchOpts
---@field insert? boolean insert the chosen hit's citation instead of opening it
---@field on_results? fun(result: table, items: table[])
---@field picker? string|fun(items: table[], opts: table) overrides the configured picker
---@field bufnr? integer

--- Search memory; fills the quickfix list and opens the picker.
---@param query string
---@param opts? memory_ls.SearchOpts
function M.search(query, opts)
  opts = opts or {}
  local bufnr = opts.bufnr or vim.api.nvim_get_current_buf()
  local target = { buf = bufnr, pos = vim.api.nvim_win_get_cursor(0) }
  M.with_client(function(client)
    local params = { query = query }
    if M.config.max_results then
      params.maxResults = M.config.max_results
    end
    request(client, "memory/search", params, function(err, result)
      if err then
        notify("search failed: " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
        return
      end
      local items, title = util.to_qf_items(result or {}, query)
      state.last_results = (result or {}).results or {}
      vim.fn.setqflist({}, " ", { title = title, items = items, context = { memory_ls = { query = query } } })
      if opts.on_results then
        opts.on_results(result, items)
      end
      if #items == 0 then
        notify(util.no_results_message(query, result))
        return
      end
      local on_choice
      if opts.insert then
        on_choice = function(item)
          insert_citation(target.buf, target.pos, item.user_data.memory_ls.citation)
        end
      else
        on_choice = open_item
      end
      local ok, e = pcall(pick, items, title, on_choice, opts.picker)
      if not ok then
        notify("picker failed: " .. tostring(e), vim.log.levels.ERROR)
      end
    end, bufnr)
  end, bufnr)
end

local function prompt(default, cb)
  vim.ui.input({ prompt = "Memory search: ", default = default }, function(input)
    if input and vim.trim(input) ~= "" then
      cb(input)
    end
  end)
end

local function scratch(name, lines, ft, mods)
  local existing = vim.fn.bufnr(name)
  local buf
  if existing ~= -1 and vim.api.nvim_buf_is_valid(existing) then
    buf = existing
  else
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, name)
  end
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].swapfile = false
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = ft or "markdown"
  local win = vim.fn.bufwinid(buf)
  if win == -1 then
    vim.cmd((mods and mods ~= "" and mods or "belowright") .. " split")
    vim.api.nvim_win_set_buf(0, buf)
  else
    vim.api.nvim_set_current_win(win)
  end
  return buf
end

--- memory/get: the cited lines in a scratch buffer (`jump`: open the file at them instead).
function M.get(citation, opts)
  opts = opts or {}
  M.with_client(function(client)
    local params = citation:match("#L%d+") and { citation = citation } or { path = citation }
    request(client, "memory/get", params, function(err, result)
      if err then
        notify("get " .. citation .. ": " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
        return
      end
      if opts.on_result then
        opts.on_result(result)
      end
      if opts.jump then
        open_item({ filename = vim.uri_to_fname(result.uri), lnum = result.from })
        return
      end
      local lines = vim.split(result.text or "", "\n", { plain = true })
      local name = string.format("memory://%s#L%d-L%d", result.path, result.from, result.to)
      local buf = scratch(name, lines, result.path:match("%.jsonl$") and "json" or "markdown", opts.mods)
      vim.b[buf].memory_ls_source = { uri = result.uri, from = result.from, to = result.to }
    end)
  end)
end

--- memory/status in a scratch buffer.
function M.status(opts)
  opts = opts or {}
  M.with_client(function(client)
    request(client, "memory/status", vim.empty_dict(), function(err, result)
      if err then
        notify("status: " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
        return
      end
      state.status[client.id] = result
      if opts.on_result then
        opts.on_result(result)
      end
      if opts.quiet then
        return
      end
      local lines = util.status_lines(result, table.concat(client.config.cmd or {}, " "))
      scratch("memory://status", lines, "markdown", opts.mods)
    end)
  end)
end

--- memory.reindex (force: full rebuild).
function M.reindex(force, opts)
  opts = opts or {}
  M.with_client(function(client)
    notify(force and "rebuilding the index..." or "reindexing...")
    request(client, "workspace/executeCommand", { command = "memory.reindex", arguments = { { force = force == true } } },
      function(err, result)
        if err then
          notify("reindex failed: " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
          return
        end
        if opts.on_result then
          opts.on_result(result)
        end
        local failed = #util.sync_failures(result) > 0
        notify(util.sync_summary(result), failed and vim.log.levels.ERROR or nil)
      end)
  end)
end

--- Search, then insert the chosen hit's citation at the cursor.
function M.insert_citation(query)
  if query and query ~= "" then
    return M.search(query, { insert = true })
  end
  prompt(nil, function(q)
    M.search(q, { insert = true })
  end)
end

--- :MemoryHealth: the findings of the memory checks (every memory file, open or not) in the
--- quickfix list, by kind, its title counting each kind; opens it. Returns the items.
function M.health()
  if #vim.lsp.get_clients({ name = M.NAME }) == 0 then
    notify("no memory-ls server is running here: open a memory file (MEMORY.md) first", vim.log.levels.WARN)
    return {}
  end
  return require("memory_ls.findings").show(M.NAME, notify)
end

-- -- status line --------------------------------------------------------------------------------

--- "memory 3/10" while indexing, else "memory: hybrid (multilingual-e5-small)" (the mode and the
--- embedding model) / "memory: keyword-only" ("" when the buffer has no memory_ls client). For
--- your statusline.
function M.statusline(bufnr)
  local client = vim.lsp.get_clients({ name = M.NAME, bufnr = bufnr or 0 })[1]
  if not client then
    return ""
  end
  local active
  for _, p in pairs(state.progress[client.id] or {}) do
    active = p
  end
  if active then
    local frac = active.message and active.message:match("%d+/%d+")
    return "memory " .. (frac or (active.percentage and (active.percentage .. "%")) or "…")
  end
  local st = state.status[client.id]
  if st then
    local f = (type(st.folders) == "table" and st.folders[1]) or st
    local prov = f.provider
    local model = (type(prov) == "table" and prov.model) and (" (" .. prov.model .. ")") or ""
    return "memory: " .. util.mode_label(st.mode) .. model
  end
  return "memory"
end

local function refresh_status(client)
  request(client, "memory/status", vim.empty_dict(), function(err, result)
    if not err and result then
      state.status[client.id] = result
      vim.schedule(function()
        vim.cmd("redrawstatus")
      end)
    end
  end)
end

-- -- setup --------------------------------------------------------------------------------------

local function complete_citations(arglead)
  local out = {}
  for _, hit in ipairs(state.last_results or {}) do
    if hit.citation:sub(1, #arglead) == arglead then
      table.insert(out, hit.citation)
    end
  end
  return out
end

local function create_commands()
  local cmd = vim.api.nvim_create_user_command
  cmd("MemorySearch", function(a)
    if a.args ~= "" then
      M.search(a.args)
    else
      local default = nil
      if a.range > 0 then
        local lines = vim.api.nvim_buf_get_lines(0, a.line1 - 1, a.line2, false)
        default = table.concat(lines, " ")
      end
      prompt(default, function(q)
        M.search(q)
      end)
    end
  end, { nargs = "*", range = true, desc = "memory-ls: search memory (quickfix + picker)" })
  cmd("MemoryGet", function(a)
    local target = a.args
    if target == "" then
      local c = util.citation_at(vim.api.nvim_get_current_line(), vim.api.nvim_win_get_cursor(0)[2])
      if not c then
        notify("usage: :MemoryGet {path#Lstart-Lend} (or put the cursor on a citation)", vim.log.levels.WARN)
        return
      end
      target = c.citation
    end
    M.get(target, { jump = a.bang, mods = a.mods })
  end, { nargs = "?", bang = true, complete = complete_citations, desc = "memory-ls: show (!: open) cited lines" })
  cmd("MemoryReindex", function(a)
    M.reindex(a.bang)
  end, { bang = true, desc = "memory-ls: reindex (!: full rebuild)" })
  cmd("MemoryStatus", function(a)
    M.status({ mods = a.mods })
  end, { desc = "memory-ls: index and provider status" })
  cmd("MemoryInsertCitation", function(a)
    M.insert_citation(a.args)
  end, { nargs = "*", desc = "memory-ls: search and insert a citation at the cursor" })
  cmd("MemoryHealth", function()
    M.health()
  end, { desc = "memory-ls: the memory checks' findings in the quickfix list, by kind" })
end

local augroup

local function create_autocmds()
  augroup = vim.api.nvim_create_augroup("memory_ls", { clear = true })
  vim.api.nvim_create_autocmd("LspAttach", {
    group = augroup,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == M.NAME and not state.status[client.id] then
        refresh_status(client)
      end
    end,
  })
  vim.api.nvim_create_autocmd("LspProgress", {
    group = augroup,
    callback = function(ev)
      local data = ev.data or {}
      local client = vim.lsp.get_client_by_id(data.client_id)
      if not client or client.name ~= M.NAME then
        return
      end
      local params = data.params or data.result or {}
      local value = params.value or {}
      local per = state.progress[client.id] or {}
      state.progress[client.id] = per
      local token = tostring(params.token)
      if value.kind == "end" then
        per[token] = nil
        refresh_status(client)
        if M.config.notify_progress and value.message then
          notify(value.message)
        end
      elseif value.kind then
        local prev = per[token] or {}
        per[token] = {
          title = value.title or prev.title,
          message = value.message or prev.message,
          percentage = value.percentage or prev.percentage,
        }
      end
      vim.cmd("redrawstatus")
    end,
  })
  -- Opening a teammate's file (quickfix, pickers, LSP jumps, :edit) loads it from the team index.
  -- Nested: setting 'filetype' in it must run the FileType autocommands (syntax, ftplugins).
  vim.api.nvim_create_autocmd("BufReadCmd", {
    group = augroup,
    pattern = M.TEAM_SCHEME .. "://*",
    nested = true,
    callback = function(ev)
      M.read_team_file(ev.buf)
    end,
  })
  vim.api.nvim_create_autocmd("LspDetach", {
    group = augroup,
    callback = function(ev)
      local id = ev.data and ev.data.client_id
      if id and not vim.lsp.get_client_by_id(id) then
        state.progress[id], state.status[id] = nil, nil
      end
    end,
  })
  if not use_lsp_config() and M.config.autostart then
    vim.api.nvim_create_autocmd("FileType", {
      group = augroup,
      pattern = filetypes(),
      callback = function(ev)
        start_for_buf(ev.buf)
      end,
    })
  end
end

--- Register the server and the commands.
---@param opts? memory_ls.Options  plugin options; any other key is taken as a server setting
function M.setup(opts)
  opts = vim.deepcopy(opts or {})
  local settings = vim.deepcopy(opts.settings or {})
  for k, v in pairs(opts) do
    if not PLUGIN_KEYS[k] then
      settings[k] = v -- e.g. setup({ provider = "none" })
      opts[k] = nil
    end
  end
  opts.settings = settings
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts)
  -- Lists replace, not merge.
  for _, k in ipairs({ "cmd", "filetypes", "root_markers" }) do
    if opts[k] then
      M.config[k] = opts[k]
    end
  end
  if opts.keymaps == false then
    M.config.keymaps = false
  end
  M.config.settings = settings
  if vim.fn.has("nvim-0.10") == 0 then
    notify("Neovim 0.10 or newer is needed", vim.log.levels.ERROR)
    return
  end
  create_commands()
  create_autocmds()
  if use_lsp_config() then
    local cfg = M.client_config()
    cfg.root_dir = function(bufnr, on_dir)
      local root = M.root_for_buf(bufnr)
      if root then
        on_dir(root)
      end
    end
    vim.lsp.config(M.NAME, cfg)
    if M.config.autostart then
      vim.lsp.enable(M.NAME)
    end
  end
  M.did_setup = true
  M.registration = use_lsp_config() and "vim.lsp.config" or "vim.lsp.start"
  -- Buffers opened before setup (e.g. `nvim MEMORY.md` with a lazy-loaded plugin); on 0.11
  -- vim.lsp.enable() takes care of them.
  if M.config.autostart and not use_lsp_config() then
    for _, buf in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(buf) and vim.tbl_contains(filetypes(), vim.bo[buf].filetype)
          and #vim.lsp.get_clients({ name = M.NAME, bufnr = buf }) == 0 then
        start_for_buf(buf)
      end
    end
  end
end

return M
