() => {
  if (window.__acChatText) return;
  window.__acChatText = true;
  const unescape = (s) => { const t = document.createElement('textarea'); t.innerHTML = s; return t.value; };
  const source = (c) => {
    if (typeof c !== 'string' || !c.includes('ac-l')) return c;
    return c.replace(/^<small class="ac-label">[^<]*<\/small>(?:\n\n)?/, '')
      .replace(/(?:\n\n)?<small class="ac-links">[\s\S]*?<\/small>/g, '')
      .replace(/<pre class="ac-lit(?: ac-block)?">\n([\s\S]*?)<\/pre>/g,
               (m, inner) => unescape(inner.replace(/<\/?a\b[^>]*>/g, '')
                 .replace(/<span class="ac-bidi">\u27e8U\+([0-9A-F]{4})\u27e9<\/span>/g,
                          (b, hex) => String.fromCodePoint(parseInt(hex, 16)))))
      .replace(/(?<=[`~])([ \t]*)[^\s`]+ ac-lang:(?=\S)/g, '$1')
      .replace(/<span class="ac-lit">([^<]*)<\/span>/g, (m, inner) => unescape(inner));
  };
  window.acSourceText = source;
  // Copy (navigator.clipboard, and the textarea + execCommand fallback of plain-http pages)
  if (navigator.clipboard && navigator.clipboard.writeText) {
    const write = navigator.clipboard.writeText.bind(navigator.clipboard);
    navigator.clipboard.writeText = (text) => write(source(text));
  }
  document.addEventListener('copy', (e) => {
    const el = document.activeElement;
    if (!el || el.tagName !== 'TEXTAREA' || el.style.left !== '-999999px' || !e.clipboardData) return;
    const text = source(el.value);
    if (text === el.value) return;
    e.clipboardData.setData('text/plain', text);
    e.preventDefault();
  }, true);
  // Edit: the box opens holding the message's content; put the text written there instead.
  const fix = (box) => {
    if (box.dataset.acFixed) return;
    box.dataset.acFixed = '1';
    const text = source(box.value);
    if (text !== box.value) {
      box.value = text;
      box.dispatchEvent(new Event('input', {bubbles: true}));
    }
  };
  // Screen readers: a message's aria-label is "user's message: <content>"; read the text written.
  // A message's menu button (Branch, Regenerate, Rewind) is named for what it is, in the page's
  // language (#ac-menu-name, a hidden field of the page), not Gradio's fixed "Feedback".
  const menuName = () => {
    const f = document.querySelector('#ac-menu-name textarea, #ac-menu-name input');
    return f && f.value.trim();
  };
  let queued = false;
  const sweep = () => {
    queued = false;
    const name = menuName();
    if (name) {
      document.querySelectorAll('#ac-chat .extra-feedback > button').forEach((b) => {
        if (b.getAttribute('aria-label') !== name) b.setAttribute('aria-label', name);
        if (b.title !== name) b.title = name;
      });
    }
    document.querySelectorAll('textarea.edit-textarea:not([data-ac-fixed])').forEach(fix);
    document.querySelectorAll('[aria-label*="ac-l"]').forEach((el) => {
      const label = el.getAttribute('aria-label');
      const text = source(label);
      if (text !== label) el.setAttribute('aria-label', text);
    });
  };
  new MutationObserver(() => {
    if (!queued) { queued = true; requestAnimationFrame(sweep); }
  }).observe(document.body, {childList: true, subtree: true, attributes: true, attributeFilter: ['aria-label']});
}
