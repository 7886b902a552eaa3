/** The dashboard's entry: the sign-in page at /login, the signed-in shell everywhere else. */
import './style.css';
import { render } from 'preact';
import { Shell } from './app.tsx';
import { Login } from './login.tsx';

const root = document.getElementById('app');
if (root) {
  // The <noscript> note is for browsers that do not run this.
  root.textContent = '';
  render(location.pathname === '/login' ? <Login /> : <Shell />, root);
}
