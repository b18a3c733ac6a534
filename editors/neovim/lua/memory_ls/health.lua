-- :checkhealth memory_ls: what is missing, and the command that fixes it.
local M = {}

local health = vim.health

-- The oldest server this plugin works with (`memory-ls --version`): memory/status with folders
-- and providerReason, memory/get of a teammate's file.
M.MIN_SERVER = "0.1.0"

-- How to install the server (docs/getting-started.md), and how to point the plugin at one.
M.INSTALL = "install memory-ls as docs/getting-started.md says: `bash install.sh` in a clone of memory-ls, "
  .. "then `source .venv/bin/activate` before starting nvim (or put the clone's `.venv/bin` on PATH)"
M.SET_CMD = "or set `cmd` to the executable: require('memory_ls').setup({ cmd = { '/path/to/memory-ls', 'serve' } })"
M.UPDATE = "update memory-ls: `git pull && bash install.sh` in its clone (docs/getting-started.md), "
  .. "or `uv tool upgrade memory-ls` / `pipx upgrade memory-ls` for a tool install"
M.MODEL_PULL = "run `memory-ls model pull` for hybrid search (or set an API key: docs/guides/providers.md)"
M.LOCAL_EXTRA = "install memory-ls with its `local` extra (llama-cpp-python): `uv tool install 'memory-ls[local]'`, "
  .. "`pipx install 'memory-ls[local]'` or `pip install 'memory-ls[local]'`; or run `memory-ls model pull`, "
  .. "which builds llama-cpp-python for this CPU"

--- The command that prints the server's version: cmd up to "serve", plus --version.
local function version_cmd(cmd)
  local out = {}
  for _, a in ipairs(cmd) do
    if a == "serve" then
      break
    end
    table.insert(out, a)
  end
  table.insert(out, "--version")
  return out
end

local function run(cmd, timeout, env)
  if vim.system then
    local ok, obj = pcall(function()
      return vim.system(cmd, { text = true, env = env }):wait(timeout)
    end)
    if not ok then
      return nil, tostring(obj)
    end
    return obj.code, vim.trim((obj.stdout or "") .. (obj.stderr or ""))
  end
  local output = vim.fn.system(cmd)
  return vim.v.shell_error, vim.trim(output)
end

--- "memory-ls 0.1.0" -> {0, 1, 0}; nil when the text has no version.
function M.parse_version(text)
  local a, b, c = tostring(text or ""):match("memory%-ls%s+v?(%d+)%.(%d+)%.?(%d*)")
  if not a then
    return nil
  end
  return { tonumber(a), tonumber(b), tonumber(c) or 0 }
end

--- Whether version v ({major, minor, patch}) is older than M.MIN_SERVER.
function M.too_old(v)
  local min = M.parse_version("memory-ls " .. M.MIN_SERVER)
  for i = 1, 3 do
    if v[i] ~= min[i] then
      return v[i] < min[i]
    end
  end
  return false
end

--- The fix for a keyword-only index, from the server's providerReason.
function M.reason_fix(reason)
  reason = tostring(reason or "")
  if reason:find("llama%-cpp%-python") or reason:find("llama_cpp") then
    return "llama-cpp-python is missing, so the local model cannot run", M.LOCAL_EXTRA
  end
  if reason:find("model pull", 1, true) or reason:find("no local model", 1, true)
    or reason:find("no embedding model", 1, true) then
    return "no embedding model", M.MODEL_PULL
  end
  return nil, "see docs/guides/models.md (local) or docs/guides/providers.md (remote)"
end

local function report_mode(st)
  local folders = (type(st.folders) == "table" and #st.folders > 0) and st.folders or { st }
  for _, f in ipairs(folders) do
    local where = f.root or f.folder or "workspace"
    if f.error and f.error ~= vim.NIL then
      health.error(string.format("%s: the index cannot be used: %s", where, f.error))
    else
      local prov = f.provider
      if prov and prov ~= vim.NIL then
        health.ok(string.format("%s: index mode hybrid (%s %s, %s dims); %s files, %s chunks", where, prov.id,
          prov.model, tostring(prov.dims or "?"), tostring(f.files or "?"), tostring(f.chunks or "?")))
      else
        local reason = (f.providerReason ~= vim.NIL and f.providerReason) or "no embedding provider"
        local msg = string.format("%s: index mode %s (%s); %s files, %s chunks", where,
          f.mode == "vector" and "vector-only" or "keyword-only", reason, tostring(f.files or "?"), tostring(f.chunks or "?"))
        if tostring(reason):match("^provider is 'none'") then
          health.ok(msg) -- chosen in the settings
        else
          local what, fix = M.reason_fix(reason)
          health.warn(what and (what .. ": " .. msg) or msg, { fix })
        end
      end
      local synced = type(f.lastSync) == "table"
      if not synced and tonumber(f.files or 0) == 0 then
        health.warn(string.format("%s: no index yet: the first sync has not finished", where),
          { "wait for it (the status line shows `memory 3/10` meanwhile), or run `:MemoryReindex` "
            .. "(`memory-ls index -w " .. where .. "` in a shell)" })
      end
      if f.fallbackReason and f.fallbackReason ~= vim.NIL then
        health.warn(string.format("%s: fallback active: %s", where, f.fallbackReason))
      end
      local team = f.store
      if type(team) == "table" and team.backend == "postgres" then
        local url = (team.url ~= vim.NIL and team.url) or "(no URL set)"
        local msg = string.format("%s: team index %s, namespace %s, answering %s", where, tostring(url),
          tostring(team.namespace), tostring(team.answering))
        if team.problem and team.problem ~= vim.NIL then
          health.warn(msg .. ": " .. tostring(team.problem))
        else
          health.ok(msg)
        end
        local srv = team.server
        if type(srv) == "table" and srv.hint and srv.hint ~= vim.NIL then
          health.warn(string.format("%s: team index server: %s", where, srv.hint))
        end
      end
      if type(f.settingsProblems) == "table" and #f.settingsProblems > 0 then
        health.warn(string.format("%s: settings problems", where), f.settingsProblems)
      end
      local ls = f.lastSync
      if type(ls) == "table" and type(ls.skipped) == "table" and #ls.skipped > 0 then
        health.info(string.format("%s: skipped in the last sync: %s", where, table.concat(ls.skipped, "; ")))
      end
      if f.sqliteVec and f.sqliteVec ~= "loaded" and f.sqliteVec ~= vim.NIL then
        health.info(string.format("%s: sqlite-vec: %s (vectors are searched in numpy)", where, f.sqliteVec))
      end
    end
  end
end

function M.check()
  health.start("memory_ls")
  local v = vim.version()
  local vs = string.format("%d.%d.%d", v.major, v.minor, v.patch)
  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. vs)
  else
    health.error("Neovim " .. vs .. ": memory_ls needs 0.10 or newer")
  end

  local ok, mls = pcall(require, "memory_ls")
  if not ok then
    health.error("require('memory_ls') failed: " .. tostring(mls))
    return
  end
  if not mls.did_setup then
    health.warn("require('memory_ls').setup() has not been called", { "add require('memory_ls').setup({}) to your config" })
  else
    health.ok("setup() done; the server is registered through " .. tostring(mls.registration))
  end

  local cmd = mls.config.cmd or mls.defaults.cmd
  local exe = vim.fn.exepath(cmd[1])
  if exe == "" then
    local where = cmd[1]:find("/", 1, true) and ("`" .. cmd[1] .. "` does not exist or is not executable")
      or ("`" .. cmd[1] .. "` is not on PATH")
    health.error(string.format("no memory-ls executable: %s (cmd = %s)", where, vim.inspect(cmd)),
      { M.INSTALL, M.SET_CMD })
  else
    health.ok(string.format("server command: %s", table.concat(vim.list_extend({ exe }, vim.list_slice(cmd, 2)), " ")))
    local vcmd = version_cmd(vim.list_extend({ exe }, vim.list_slice(cmd, 2)))
    local code, out = run(vcmd, 20000, mls.config.cmd_env)
    local v = code == 0 and M.parse_version(out) or nil
    if not v then
      local first = vim.split(tostring(out or ""), "\n", { plain = true })
      health.error(string.format("memory-ls fails to start: `%s` exited with %s: %s", table.concat(vcmd, " "),
        tostring(code), table.concat(vim.list_slice(first, math.max(1, #first - 4)), " | ")),
        { "reinstall it: " .. M.INSTALL, M.SET_CMD })
    elseif M.too_old(v) then
      health.error(string.format("server version: %s is too old: this plugin needs memory-ls %s or newer", out,
        M.MIN_SERVER), { M.UPDATE })
    else
      health.ok("server version: " .. out)
    end
  end

  local clients = vim.lsp.get_clients({ name = mls.NAME })
  if #clients == 0 then
    health.info("no memory_ls client is running: open a file under a folder with MEMORY.md, memory.md or memory/ "
      .. "(or run :MemoryStatus) to start one")
    return
  end
  for _, client in ipairs(clients) do
    health.ok(string.format("client %d running for %s", client.id, tostring(client.config.root_dir)))
    local resp, err = mls._request_sync(client, "memory/status", vim.empty_dict(), 10000)
    if not resp then
      health.error("memory/status did not answer: " .. tostring(err))
    elseif resp.err then
      health.error("memory/status failed: " .. tostring(resp.err.message or vim.inspect(resp.err)))
    else
      report_mode(resp.result or {})
    end
  end
end

return M
