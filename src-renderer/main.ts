// Entry of the renderer: mounts the app.
import { mount } from 'svelte'
import App from './App.svelte'
import './app.css'
import './styles/shared.css'

mount(App, { target: document.getElementById('app')! })
