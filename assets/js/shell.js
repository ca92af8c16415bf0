// The shell (webui/gui/first_paint.py): the sidebar in the page's first paint, run as the HTML is
// parsed, before Gradio's scripts. It goes in the first frame Gradio's own list is drawn where
// its own is (see look, below); a row or New chat clicked on it is clicked again once the page's
// load has answered (ac-page-loaded), as a click on the real list so early waits for it too.
(() => {
  const shell = document.getElementById('ac-shell');
  if (!shell) return;
  // Its style nests the page's rules under #ac-shell: a browser without CSS nesting gets none.
  if (!(window.CSS && CSS.supports && CSS.supports('selector(&)'))) { shell.remove(); return; }
  // The theme the page will have (the same choice as theme_head.js): the switch's stored
  // choice, Gradio's ?__theme=, else the system's.
  let choice = 'system';
  try { choice = localStorage.getItem('__KEY__') || 'system'; } catch (e) {}
  const forced = new URLSearchParams(window.location.search).get('__theme');
  if (forced === 'dark' || forced === 'light') choice = forced;
  const dark = choice === 'dark' || (choice !== 'light' && window.matchMedia('(prefers-color-scheme: dark)').matches);
  shell.classList.toggle('ac-dark', dark);
  shell.querySelector('.ac-shell-in').classList.toggle('dark', dark);  // the page's .dark rules, nested
  let pick = null;  // {sid} or {fresh: true}: the last click on the shell
  shell.addEventListener('click', (e) => {
    if (e.target.closest('[data-menu], [data-more]')) return;  // a row's menu needs the real list
    const row = e.target.closest('[data-sid]');
    if (row) {
      shell.querySelectorAll('.ac-session.active').forEach((x) => x.classList.remove('active'));
      row.classList.add('active');
      pick = {sid: row.dataset.sid};
    } else if (e.target.closest('[data-shell-new]')) {
      shell.querySelectorAll('.ac-session.active').forEach((x) => x.classList.remove('active'));
      pick = {fresh: true};
    }
  });
  const realRow = (sid) => document.querySelector(`#__LIST__ [data-sid="${CSS.escape(sid)}"]`);
  // What is typed into the shell's search box goes to the real one (and is searched for once the
  // page's load has answered, which would otherwise draw the whole list over its results).
  const query = shell.querySelector('.ac-shell-search');
  let typed = false;
  const realSearch = () => document.querySelector('#ac-search textarea, #ac-search input');
  const leave = () => {
    if (!shell.isConnected) return;
    const text = query.value;
    const focused = document.activeElement === query;
    shell.remove();
    if (pick && pick.sid && realRow(pick.sid)) {  // the row stays marked as it was on the shell
      document.querySelectorAll('#__LIST__ .ac-session.active').forEach((x) => x.classList.remove('active'));
      realRow(pick.sid).classList.add('active');
    }
    const box = realSearch();
    if (box && (text || focused)) {
      if (text) { box.value = text; typed = true; }
      box.focus();
      box.setSelectionRange(box.value.length, box.value.length);
    }
  };
  // The first row (or the empty list's sentence): the shell's and Gradio's.
  const first = (root) => root.querySelector('.ac-session, .ac-empty');
  // Looked at once per frame, before it is painted (a MutationObserver on the page would be
  // handed every node Gradio mounts). The shell goes when Gradio's list is drawn where the
  // shell's is: not before New chat and the search box above it are mounted too (a trial saw
  // the list jump up, then down), and no frame paints neither.
  const look = () => {
    if (!shell.isConnected) return;
    const mine = first(shell);
    const real = document.querySelector('#__LIST__') && first(document.querySelector('#__LIST__'));
    if (real && mine) {
      const a = mine.getBoundingClientRect();
      const b = real.getBoundingClientRect();
      if (Math.abs(a.top - b.top) < 0.5 && Math.abs(a.left - b.left) < 0.5 && b.height > 0) { leave(); return; }
    }
    requestAnimationFrame(look);
  };
  requestAnimationFrame(look);
  window.addEventListener('ac-page-loaded', () => {
    leave();
    const box = realSearch();
    if (typed && box && box.value) box.dispatchEvent(new Event('input', {bubbles: true}));
    if (!pick) return;
    const target = pick.sid ? realRow(pick.sid) : document.getElementById('ac-new');
    pick = null;
    if (target) target.click();
  }, {once: true});
})();
