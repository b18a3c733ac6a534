-- :checkhealth memory_ls
local M = {}

local health = vim.health

local INSTALL = "install it with `pipx install memory-ls` (or `pip install -e .` in a clone), "
  .. "or set `cmd` in require('memory_ls').setup({ cmd = { '/path/to/memory-ls', 'serve' } })"

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

local function run(cmd, timeout)
  if vim.system then
    local ok, obj = pcall(function()
      return vim.system(cmd, { text = true }):wait(timeout)
    end)
    if not ok then
      return nil, tostring(obj)
    end
    return obj.code, vim.trim((obj.stdout or "") .. (obj.stderr or ""))
  end
  local output = vim.fn.system(cmd)
  return vim.v.shell_error, vim.trim(output)
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
          health.warn(msg, { "run `memory-ls model pull` for hybrid search, or set an API key (see docs/guides/models.md)" })
        end
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
    health.error(string.format("server command `%s` not found", cmd[1]), { INSTALL })
  else
    health.ok(string.format("server command: %s", table.concat(vim.list_extend({ exe }, vim.list_slice(cmd, 2)), " ")))
    local code, out = run(version_cmd(vim.list_extend({ exe }, vim.list_slice(cmd, 2))), 20000)
    if code == 0 and out and out ~= "" then
      health.ok("server version: " .. out)
    else
      health.error("`" .. table.concat(version_cmd(cmd), " ") .. "` failed: " .. tostring(out), { INSTALL })
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
